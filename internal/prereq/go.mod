module github.com/nitro-go/nitro/internal/prereq

go 1.26
