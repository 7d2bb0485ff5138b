module github.com/nitro-go/nitro/cmd

go 1.26
