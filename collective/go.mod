module github.com/nitro-go/nitro/collective

go 1.26
