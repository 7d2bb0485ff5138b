module github.com/nitro-go/nitro/tensorfile

go 1.26

require github.com/gomlx/gopjrt v0.10.0

require (
	github.com/pkg/errors v0.9.1 // indirect
	github.com/x448/float16 v0.8.4 // indirect
	google.golang.org/protobuf v1.36.10 // indirect
)
