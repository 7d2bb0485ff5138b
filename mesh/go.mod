module github.com/nitro-go/nitro/mesh

go 1.26

require (
	github.com/gomlx/gomlx v0.25.0
	github.com/gomlx/gopjrt v0.10.0
)
