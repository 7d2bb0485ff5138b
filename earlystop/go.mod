module github.com/nitro-go/nitro/earlystop

go 1.26
