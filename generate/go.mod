module github.com/nitro-go/nitro/generate

go 1.26
