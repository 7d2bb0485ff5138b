module github.com/nitro-go/nitro/prefetch

go 1.26
