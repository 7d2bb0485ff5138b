module github.com/nitro-go/nitro/compilecache

go 1.26
