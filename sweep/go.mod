module github.com/nitro-go/nitro/sweep

go 1.26

require github.com/nitro-go/nitro/internal/prereq v0.0.0

replace github.com/nitro-go/nitro/internal/prereq => ../internal/prereq
