module github.com/nitro-go/nitro/engine

go 1.26

require (
	github.com/gomlx/gomlx v0.25.0
	github.com/gomlx/gopjrt v0.10.0
	github.com/nitro-go/nitro/backend v0.0.0
	github.com/nitro-go/nitro/checkpoint v0.0.0
	github.com/nitro-go/nitro/compilecache v0.0.0
	github.com/nitro-go/nitro/dotgrad v0.0.0
	github.com/nitro-go/nitro/markers v0.0.0
	github.com/nitro-go/nitro/mesh v0.0.0
	github.com/nitro-go/nitro/metrics v0.0.0
	github.com/nitro-go/nitro/optimizers v0.0.0
	github.com/nitro-go/nitro/precision v0.0.0
	github.com/nitro-go/nitro/prefetch v0.0.0
	github.com/nitro-go/nitro/tensorfile v0.0.0
)

replace (
	github.com/nitro-go/nitro/backend => ../backend
	github.com/nitro-go/nitro/checkpoint => ../checkpoint
	github.com/nitro-go/nitro/compilecache => ../compilecache
	github.com/nitro-go/nitro/dotgrad => ../dotgrad
	github.com/nitro-go/nitro/internal/prereq => ../internal/prereq
	github.com/nitro-go/nitro/markers => ../markers
	github.com/nitro-go/nitro/mesh => ../mesh
	github.com/nitro-go/nitro/metrics => ../metrics
	github.com/nitro-go/nitro/optimizers => ../optimizers
	github.com/nitro-go/nitro/precision => ../precision
	github.com/nitro-go/nitro/prefetch => ../prefetch
	github.com/nitro-go/nitro/runstatus => ../runstatus
	github.com/nitro-go/nitro/schedules => ../schedules
	github.com/nitro-go/nitro/tensorfile => ../tensorfile
)
