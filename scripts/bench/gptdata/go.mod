module github.com/nitro-go/nitro/scripts/bench/gptdata

go 1.26

require (
	github.com/gomlx/gomlx v0.25.0
	github.com/nitro-go/nitro/prefetch v0.0.0
)

require (
	github.com/andybalholm/brotli v1.1.1 // indirect
	github.com/go-logr/logr v1.4.3 // indirect
	github.com/gomlx/gopjrt v0.10.0 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/klauspost/compress v1.17.9 // indirect
	github.com/nitro-go/nitro/tensorfile v0.0.0 // indirect
	github.com/parquet-go/bitpack v1.0.0 // indirect
	github.com/parquet-go/jsonlite v1.0.0 // indirect
	github.com/parquet-go/parquet-go v0.32.0 // indirect
	github.com/pierrec/lz4/v4 v4.1.21 // indirect
	github.com/pkg/errors v0.9.1 // indirect
	github.com/twpayne/go-geom v1.6.1 // indirect
	github.com/x448/float16 v0.8.4 // indirect
	golang.org/x/exp v0.0.0-20250819193227-8b4c13bb791b // indirect
	golang.org/x/sys v0.38.0 // indirect
	google.golang.org/protobuf v1.36.10 // indirect
	k8s.io/klog/v2 v2.130.1 // indirect
)

replace (
	github.com/nitro-go/nitro/prefetch => ../../../prefetch
	github.com/nitro-go/nitro/tensorfile => ../../../tensorfile
)
