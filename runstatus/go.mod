module github.com/nitro-go/nitro/runstatus

go 1.26
