module github.com/nitro-go/nitro/exportbundle

go 1.26
