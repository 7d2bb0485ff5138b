module github.com/nitro-go/nitro/sweep

go 1.26
