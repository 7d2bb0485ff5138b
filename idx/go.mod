module github.com/nitro-go/nitro/idx

go 1.26
