module github.com/nitro-go/nitro/render

go 1.26

require (
	github.com/nitro-go/nitro/tensorfile v0.0.0
	golang.org/x/image v0.26.0
)

require (
	github.com/gomlx/gopjrt v0.10.0 // indirect
	github.com/pkg/errors v0.9.1 // indirect
	github.com/x448/float16 v0.8.4 // indirect
	google.golang.org/protobuf v1.36.10 // indirect
)

replace github.com/nitro-go/nitro/tensorfile => ../tensorfile
