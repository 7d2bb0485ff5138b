module github.com/nitro-go/nitro/board

go 1.26

require (
	github.com/nitro-go/nitro/checkpoint v0.0.0
	github.com/nitro-go/nitro/earlystop v0.0.0
	github.com/nitro-go/nitro/sweep v0.0.0
)

require (
	github.com/gomlx/gopjrt v0.10.0 // indirect
	github.com/nitro-go/nitro/runstatus v0.0.0 // indirect
	github.com/nitro-go/nitro/tensorfile v0.0.0
	github.com/pkg/errors v0.9.1 // indirect
	github.com/x448/float16 v0.8.4 // indirect
	google.golang.org/protobuf v1.36.10 // indirect
)

replace (
	github.com/nitro-go/nitro/checkpoint => ../checkpoint
	github.com/nitro-go/nitro/earlystop => ../earlystop
	github.com/nitro-go/nitro/internal/prereq => ../internal/prereq
	github.com/nitro-go/nitro/runstatus => ../runstatus
	github.com/nitro-go/nitro/sweep => ../sweep
	github.com/nitro-go/nitro/tensorfile => ../tensorfile
)
