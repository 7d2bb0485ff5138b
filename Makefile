# nitro — one Makefile for the whole go.work workspace.
# `make run` trains the MNIST example with the CLI; `make test` runs every test. Both set up first.

MODULES := internal/prereq tensorfile idx hooks generate roofline sweep markers mesh metrics collective mpi compilecache pjrthook hostalloc optimizers schedules runstatus earlystop prefetch dist checkpoint logjson exportbundle monitors promexport tblog backend dotgrad precision engine render board core export cmd integration
PKGS    := $(addprefix ./,$(addsuffix /...,$(MODULES)))
# Race detector on the modules with goroutines or concurrency contracts and their tests (prefetch:
# concurrent BatchAt; mesh: Stage from the prefetch goroutine). core and engine are left out: GoMLX v0.25.0's
# pure-Go backend, which their unit tests run on, has known races.
RACE    := tensorfile collective mesh compilecache pjrthook markers monitors prefetch logjson checkpoint promexport exportbundle render board tblog
# integration under the race detector: only its tests whose goroutines read a command's output while
# the command writes it (lockedBuffer, integration/output_test.go); their work is in the programs they
# start, so -race costs them little (55 s, about their time without it). The whole package measured
# 214 s with -race against 162 s without on a quiet 2-core machine, 417 s when loaded, plus 86 s to
# build; the run without -race stays, so all of it would be added: 5 to 8 minutes to a CI of about 12,
# over the ~6 it may grow by.
RACE_INTEGRATION := ^(TestCtrlCStopsAProgramGracefully|TestMPIResume.*|TestMPIStopsWhenARankDies|TestNitroUnderPreloadedAllocators)$$
GO      ?= go
# checkpoint's interop test opens nitro's files with the reference Python safetensors (ckpt-venv);
# tblog's reads its event files back with TensorBoard's own reader (tb-venv); serve's Open Inference
# Protocol test talks to it with Triton's Python client, and parses its metrics with Prometheus's (serve-venv);
# sweep's reads its records with Optuna's JournalStorage, and reads back one Optuna wrote (optuna-venv).
# GOPROXY=off: the tests run on what `make setup` downloaded, so a module it misses fails here, on
# every machine, rather than only on a newcomer's empty module cache.
# NITRO_COMPILE_CACHE: the tests' programs go to a disk compile cache under .nitro, never the
# user's: a test run neither fills nor depends on ~/.cache, and a second `make test` compiles
# little (the cache's own tests point it at their temporary folders).
TESTENV := NITRO_SAFETENSORS_PYTHON=$(CURDIR)/.nitro/ckpt-venv/bin/python NITRO_TENSORBOARD_PYTHON=$(CURDIR)/.nitro/tb-venv/bin/python NITRO_SERVE_PYTHON=$(CURDIR)/.nitro/serve-venv/bin/python NITRO_OPTUNA_PYTHON=$(CURDIR)/.nitro/optuna-venv/bin/python NITRO_COMPILE_CACHE=$(CURDIR)/.nitro/test-compile-cache GOPROXY=off
ARGS    ?=

.PHONY: setup cuda-wheel openmpi allocators test lint bench bench-venv ckpt-venv tb-venv serve-venv optuna-venv depcheck run fmt gpu-bin $(addprefix test/,$(MODULES))

## setup: install the pinned XLA CPU PJRT plugin into .nitro/pjrt and download Go modules (idempotent);
## CUDA=1 also installs the CUDA plugin and its NVIDIA libraries (docs/gpu.md)
CUDA ?=
# A CPU-only setup (make run) does not fetch the CUDA plugin wheel; make test does (cuda-wheel).
setup:
	@NITRO_SKIP_CUDA_WHEEL=$(if $(filter-out 0,$(CUDA)),,1) CUDA=$(CUDA) ./scripts/install-pjrt.sh
	@for m in $(MODULES); do (cd $$m && $(GO) mod download) || exit 1; done

## depcheck: no module but cmd/export/integration imports core, and engine imports none of core/export/cmd; internal/prereq and tensorfile import no
## module; exportbundle does not import checkpoint; no cycles between modules; core's import graph holds
## no exportbundle and no cgo package of ours but the PJRT interposer (pjrthook): hostalloc (plain Go: it preloads jemalloc) is linked only by a program
## that imports it (the nitro CLI does); only tests import core/coretest
depcheck:
	@$(GO) run ./integration/depcheck .

## ckpt-venv: the reference Python safetensors reader for checkpoint's interop test (test-only)
ckpt-venv:
	@./scripts/ckpt/setup-venv.sh

## tb-venv: TensorBoard's Python event-file reader for tblog's read-back test (test-only; no TensorFlow)
tb-venv:
	@./scripts/tblog/setup-venv.sh

## serve-venv: Triton's and KServe's Python clients (tritonclient[http], kserve) and the Prometheus Python client, for serve's
## Open Inference Protocol and metrics tests (test-only)
serve-venv:
	@./scripts/serve/setup-venv.sh

## optuna-venv: Optuna, whose JournalStorage reads sweep records in sweep's interop test (test-only)
optuna-venv:
	@./scripts/sweep/setup-venv.sh

## test: setup, layering check, then every module's tests (race detector on the concurrent modules),
## then a short fuzz of the checkpoint, run dir manifest, safetensors, bundle, infer request (a generator's too), idx and compile cache entry readers and the interposer's compile options rewrite (hostile input must never panic).
## The fuzz budget is a count, not a duration: Go 1.26's fuzz coordinator can report a spurious
## "context deadline exceeded" when a duration ends mid-execution (golang/go#75804, fixed in Go 1.27).
## cuda-wheel: keep the pinned CUDA plugin wheel (188 MB) in .nitro/cache for backend's test that
## loads the real CUDA plugin on a host without a GPU (test-only; never the NVIDIA libraries)
cuda-wheel:
	@NITRO_SKIP_CUDA_WHEEL= ./scripts/install-pjrt.sh

## gpu-bin: the programs scripts/gpu-check.sh runs (nitro, backend.test, integration.test, xprocess), built here
## and gzipped into .nitro/gpu-bin for a GPU host without Go (NITRO_GPU_BIN=.nitro/gpu-bin there)
gpu-bin:
	@mkdir -p .nitro/gpu-bin && rm -f .nitro/gpu-bin/*
	@$(GO) build -ldflags='-s -w' -o .nitro/gpu-bin/nitro ./cmd/nitro
	@$(GO) test -c -ldflags='-s -w' -o .nitro/gpu-bin/backend.test ./backend/
	@cd integration && $(GO) test -c -ldflags='-s -w' -o ../.nitro/gpu-bin/integration.test .
	@$(GO) build -ldflags='-s -w' -o .nitro/gpu-bin/xprocess ./integration/testdata/xprocess
	@gzip -9 .nitro/gpu-bin/*
	@ls -l .nitro/gpu-bin

## openmpi: Open MPI (mpirun, libmpi.so.40) for the multi-process tests, installed with apt-get when
## absent (test-only: training and `make run` load no MPI)
openmpi:
	@./scripts/install-openmpi.sh

## allocators: jemalloc, tcmalloc and mimalloc (Debian's libjemalloc2, libtcmalloc-minimal4, libmimalloc2.0)
## for the tests that run nitro under each one preloaded, installed with apt-get when absent (test-only)
allocators:
	@./scripts/install-allocators.sh

test: setup cuda-wheel openmpi allocators depcheck ckpt-venv tb-venv serve-venv optuna-venv
	$(TESTENV) $(GO) test -count=1 -timeout 25m $(PKGS)
	$(TESTENV) $(GO) test -count=1 -race $(addprefix ./,$(addsuffix /...,$(RACE)))
	$(TESTENV) $(GO) test -count=1 -race -run '$(RACE_INTEGRATION)' ./integration/
	$(TESTENV) $(GO) test -run '^$$' -fuzz '^FuzzRead$$' -fuzztime 60000x -fuzzminimizetime 100x ./checkpoint/
	$(TESTENV) $(GO) test -run '^$$' -fuzz '^FuzzReadSigned$$' -fuzztime 60000x -fuzzminimizetime 100x ./checkpoint/
	$(TESTENV) $(GO) test -run '^$$' -fuzz '^FuzzParseManifest$$' -fuzztime 60000x -fuzzminimizetime 100x ./checkpoint/
	$(TESTENV) $(GO) test -run '^$$' -fuzz '^FuzzReadManifest$$' -fuzztime 60000x -fuzzminimizetime 100x ./exportbundle/
	$(TESTENV) $(GO) test -run '^$$' -fuzz '^FuzzDecodeWeights$$' -fuzztime 60000x -fuzzminimizetime 100x ./exportbundle/
	$(TESTENV) $(GO) test -run '^$$' -fuzz '^FuzzDecodeInfer$$' -fuzztime 60000x -fuzzminimizetime 100x ./exportbundle/
	$(TESTENV) $(GO) test -run '^$$' -fuzz '^FuzzDecodeGenerate$$' -fuzztime 60000x -fuzzminimizetime 100x ./exportbundle/
	$(TESTENV) $(GO) test -run '^$$' -fuzz '^FuzzDecodeSafetensors$$' -fuzztime 60000x -fuzzminimizetime 100x ./tensorfile/
	$(TESTENV) $(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime 60000x -fuzzminimizetime 100x ./idx/
	$(TESTENV) $(GO) test -run '^$$' -fuzz '^FuzzDecodeEntry$$' -fuzztime 60000x -fuzzminimizetime 100x ./pjrthook/diskcache/
	$(TESTENV) $(GO) test -run '^$$' -fuzz '^FuzzWidenOptions$$' -fuzztime 60000x -fuzzminimizetime 100x ./pjrthook/
	$(TESTENV) $(GO) test -run '^$$' -fuzz '^FuzzAddAliases$$' -fuzztime 30000x -fuzzminimizetime 100x ./pjrthook/

## test/<module>: one module's tests
$(addprefix test/,$(MODULES)): test/%:
	$(GO) test -count=1 ./$*/...

## lint: gofmt and go vet over every module
lint:
	@out=$$(gofmt -l $(MODULES)); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)

fmt:
	gofmt -w $(MODULES)

## bench-venv: the JAX + optax peer's venv, for `make bench` only (pins: scripts/bench/requirements.txt)
bench-venv:
	@./scripts/bench/setup-venv.sh

## bench: benchmarks that print ratios measured in one run (the step against GoMLX and JAX, on the MLP
## and on the model families: MLP, CNN, transformer, and the GPT example at its small preset and at GPT-2 small's shape,
## each against JAX on the fastest of glibc, tcmalloc and jemalloc; the
## optimizer program against a one-pass copy, the all-reduce's share of the step at 2 processes (mpirun) on the
## MNIST MLP and the three families with the network model it feeds, and its layouts at 6/60/600 arrays; the engine's
## compiles and steps at 6/60/600 arrays against the per-array optimizer program; the JSON logger;
## checkpoint I/O; the prefetch pipeline and the Parquet source; the server's load over loopback
## against the in-process runner, /predict against /v2 JSON and binary from Go and through the real
## clients (tritonclient), and its peak RSS under hostile bodies, on /v2 too). -timeout 60m: the families
## alone run minutes on a loaded machine (GPT-2's shape takes seconds a step), past go test's default 10m per package; fresh processes' start to
## the first optimizer step and compile seconds with the disk compile cache off, cold and warm, beside
## JAX's persistent cache on the same MLP (scripts/bench/jax_start.py)
# NITRO_COMPILE_CACHE=off: every benchmark's compile times stay compiles (the disk cache's own
# benchmark points each of its processes at its own folders).
bench: setup bench-venv serve-venv
	NITRO_COMPILE_CACHE=off NITRO_BENCH_PYTHON=$(CURDIR)/.nitro/bench-venv/bin/python NITRO_SERVE_PYTHON=$(CURDIR)/.nitro/serve-venv/bin/python $(GO) test -timeout 60m -run '^$$' -bench . -benchtime 1x ./integration/... ./core/ ./engine/ ./checkpoint/ ./prefetch/... ./exportbundle/

## run: train the MNIST example through the CLI, afresh each time: --overwrite replaces the
## earlier `make run`'s record and checkpoints in runs/MLP (a fresh run into a run dir holding
## one is refused otherwise); to continue that run instead, run the CLI with --resume auto
run: setup
	$(GO) run ./cmd/nitro train mnist-mlp --overwrite $(ARGS)
