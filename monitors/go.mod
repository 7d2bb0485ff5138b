module github.com/nitro-go/nitro/monitors

go 1.26
