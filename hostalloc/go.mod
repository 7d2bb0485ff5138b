module github.com/nitro-go/nitro/hostalloc

go 1.26
