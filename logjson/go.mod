module github.com/nitro-go/nitro/logjson

go 1.26
