module github.com/nitro-go/nitro/monitors

go 1.26

require (
	github.com/nitro-go/nitro/tensorfile v0.0.0
	github.com/schollz/progressbar/v3 v3.19.1
	go.uber.org/goleak v1.3.0
	golang.org/x/term v0.48.0
)

require (
	github.com/gomlx/gopjrt v0.10.0 // indirect
	github.com/mitchellh/colorstring v0.0.0-20190213212951-d06e56a500db // indirect
	github.com/pkg/errors v0.9.1 // indirect
	github.com/rivo/uniseg v0.4.7 // indirect
	github.com/x448/float16 v0.8.4 // indirect
	golang.org/x/sys v0.50.0 // indirect
	google.golang.org/protobuf v1.36.10 // indirect
)

replace github.com/nitro-go/nitro/tensorfile => ../tensorfile
