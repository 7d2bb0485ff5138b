module github.com/nitro-go/nitro/logjson

go 1.26

require (
	github.com/nitro-go/nitro/runstatus v0.0.0
	go.uber.org/zap v1.28.0
)

require go.uber.org/multierr v1.10.0 // indirect

replace github.com/nitro-go/nitro/runstatus => ../runstatus
