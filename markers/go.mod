module github.com/nitro-go/nitro/markers

go 1.26
