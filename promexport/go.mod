module github.com/nitro-go/nitro/promexport

go 1.26

require (
	github.com/nitro-go/nitro/internal/prereq v0.0.0
	github.com/nitro-go/nitro/logjson v0.0.0
	github.com/nitro-go/nitro/monitors v0.0.0
	github.com/nitro-go/nitro/runstatus v0.0.0 // indirect
	github.com/nitro-go/nitro/tensorfile v0.0.0 // indirect
	github.com/prometheus/client_golang v1.25.0
	github.com/prometheus/client_model v0.6.3
	github.com/prometheus/common v0.74.0
	go.uber.org/goleak v1.3.0
)

require (
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/mitchellh/colorstring v0.0.0-20190213212951-d06e56a500db // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/pandatix/go-abnf v0.5.5 // indirect
	github.com/prometheus/procfs v0.22.0 // indirect
	github.com/rivo/uniseg v0.4.7 // indirect
	github.com/schollz/progressbar/v3 v3.19.1 // indirect
	go.uber.org/multierr v1.10.0 // indirect
	go.uber.org/zap v1.28.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
	golang.org/x/term v0.48.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)

replace (
	github.com/nitro-go/nitro/internal/prereq => ../internal/prereq
	github.com/nitro-go/nitro/logjson => ../logjson
	github.com/nitro-go/nitro/monitors => ../monitors
	github.com/nitro-go/nitro/runstatus => ../runstatus
	github.com/nitro-go/nitro/tensorfile => ../tensorfile
)
