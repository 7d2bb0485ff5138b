module github.com/nitro-go/nitro/checkpoint

go 1.26
