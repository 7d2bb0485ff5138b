module github.com/nitro-go/nitro/metrics

go 1.26
