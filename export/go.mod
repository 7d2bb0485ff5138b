module github.com/nitro-go/nitro/export

go 1.26

require (
	github.com/gomlx/gomlx v0.25.0
	github.com/gomlx/gopjrt v0.10.0
	github.com/nitro-go/nitro/core v0.0.0
	github.com/nitro-go/nitro/exportbundle v0.0.0
)

replace (
	github.com/nitro-go/nitro/checkpoint => ../checkpoint
	github.com/nitro-go/nitro/compilecache => ../compilecache
	github.com/nitro-go/nitro/core => ../core
	github.com/nitro-go/nitro/exportbundle => ../exportbundle
	github.com/nitro-go/nitro/internal/prereq => ../internal/prereq
	github.com/nitro-go/nitro/logjson => ../logjson
	github.com/nitro-go/nitro/markers => ../markers
	github.com/nitro-go/nitro/monitors => ../monitors
	github.com/nitro-go/nitro/optimizers => ../optimizers
	github.com/nitro-go/nitro/prefetch => ../prefetch
	github.com/nitro-go/nitro/schedules => ../schedules
)
