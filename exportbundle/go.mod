module github.com/nitro-go/nitro/exportbundle

go 1.26

require (
	github.com/gomlx/gomlx v0.25.0
	github.com/gomlx/gopjrt v0.10.0
	github.com/nitro-go/nitro/internal/prereq v0.0.0
	github.com/nitro-go/nitro/pjrthook v0.0.0
	github.com/nitro-go/nitro/runstatus v0.0.0 // indirect
	github.com/nitro-go/nitro/tensorfile v0.0.0
	github.com/x448/float16 v0.8.4
)

require (
	github.com/dustin/go-humanize v1.0.1 // indirect
	github.com/go-logr/logr v1.4.3 // indirect
	github.com/gomlx/stablehlo v0.2.0 // indirect
	github.com/nitro-go/nitro/generate v0.0.0
	github.com/pkg/errors v0.9.1 // indirect
	golang.org/x/exp v0.0.0-20250819193227-8b4c13bb791b // indirect
	google.golang.org/protobuf v1.36.10 // indirect
	k8s.io/klog/v2 v2.130.1 // indirect
)

replace (
	github.com/nitro-go/nitro/internal/prereq => ../internal/prereq
	github.com/nitro-go/nitro/pjrthook => ../pjrthook
	github.com/nitro-go/nitro/runstatus => ../runstatus
	github.com/nitro-go/nitro/tensorfile => ../tensorfile
)

replace github.com/nitro-go/nitro/generate => ../generate
