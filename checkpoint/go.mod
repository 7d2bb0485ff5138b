module github.com/nitro-go/nitro/checkpoint

go 1.26

require (
	github.com/nitro-go/nitro/internal/prereq v0.0.0
	github.com/nitro-go/nitro/runstatus v0.0.0
)

replace (
	github.com/nitro-go/nitro/internal/prereq => ../internal/prereq
	github.com/nitro-go/nitro/runstatus => ../runstatus
)
