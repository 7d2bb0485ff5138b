module github.com/nitro-go/nitro/schedules

go 1.26
