module github.com/nitro-go/nitro/tblog

go 1.26

require (
	github.com/nitro-go/nitro/internal/prereq v0.0.0
	github.com/nitro-go/nitro/logjson v0.0.0
	google.golang.org/protobuf v1.36.12
)

require (
	github.com/nitro-go/nitro/runstatus v0.0.0 // indirect
	go.uber.org/multierr v1.10.0 // indirect
	go.uber.org/zap v1.28.0 // indirect
)

replace (
	github.com/nitro-go/nitro/internal/prereq => ../internal/prereq
	github.com/nitro-go/nitro/logjson => ../logjson
	github.com/nitro-go/nitro/runstatus => ../runstatus
)
