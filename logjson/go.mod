module github.com/nitro-go/nitro/logjson

go 1.26

require go.uber.org/zap v1.28.0

require go.uber.org/multierr v1.10.0 // indirect
