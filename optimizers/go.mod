module github.com/nitro-go/nitro/optimizers

go 1.26
