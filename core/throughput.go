package core

import (
	"fmt"

	"github.com/gomlx/gopjrt/dtypes"

	"github.com/nitro-go/nitro/backend"
	"github.com/nitro-go/nitro/roofline"
)

// Throughputer is the optional hook of a model whose cost per token is known, a sequence model:
// with it, each period reports tokens per second and the model FLOPs utilization (MFU) against
// the device's measured matrix-product rate (package roofline), in the console's line, the
// record's "data" line (tokens_per_second, mfu) and so the board.
type Throughputer interface {
	Throughput() Throughput
}

// Throughput is what one sample of a batch costs: the tokens it holds, and the FLOPs training one
// of them takes (forward and backward; roofline.TransformerFLOPsPerToken for a transformer).
type Throughput struct {
	TokensPerSample    int
	TrainFLOPsPerToken float64
}

// throughput is the run's accounting of tokens and FLOPs: nil without the hook.
type throughput struct {
	cost            Throughput
	samplesPerStep  int // rows of one optimizer step over every process: width * accum * processes
	peak            roofline.Peak
	devices         int    // peaks the run spans: 1 on the CPU (its devices share the cores), else devices * processes
	peakErr         string // why there is no peak (MFU left out), said once
	measuredOnStart bool
}

// resolveThroughput reads the hook (none: no accounting), refusing a cost that counts nothing.
func (bld *builder) resolveThroughput() error {
	n := bld.n
	t, ok := n.spec.e.(Throughputer)
	if !ok {
		return nil
	}
	c := t.Throughput()
	if c.TokensPerSample < 1 || !(c.TrainFLOPsPerToken >= 0) {
		return fmt.Errorf("Throughput() = %+v: TokensPerSample must be >= 1 and TrainFLOPsPerToken >= 0 (0: tokens per second without MFU)", c)
	}
	procs := 1
	if n.spec.opts.collective != nil {
		procs = distOf(n.spec.opts).WorldSize
	}
	devices := n.spec.devs.n.value * procs
	if onCPU(n.spec.backend) {
		devices = procs
	}
	n.spec.tput = &throughput{cost: c, samplesPerStep: n.spec.trainWidth * n.spec.cfg.accum.value * procs, devices: devices}
	return nil
}

// measurePeak measures the device's matrix-product rate once per process, before the first
// period, in the dtype the run's products compute in: on a busy device it would read low.
func (n *Nitro) measurePeak() {
	tp := n.spec.tput
	if tp == nil || tp.measuredOnStart || tp.cost.TrainFLOPsPerToken == 0 {
		return
	}
	tp.measuredOnStart = true
	dtype, side := dtypes.Float32, 1024
	if n.spec.cfg.precision.value.Casts() {
		dtype = dtypes.BFloat16
	}
	switch {
	case n.spec.backend.Name == backend.Go:
		side = 256 // pure Go runs a 1024² product in seconds
	case !onCPU(n.spec.backend):
		side = 4096 // a GPU needs a larger product to fill
	}
	p, err := roofline.Cached(n.spec.backend.Backend, dtype, side)
	if err != nil {
		tp.peakErr = err.Error()
		n.spec.warn(fmt.Sprintf("no model FLOPs utilization this run: %v", err))
		return
	}
	tp.peak = p
	n.spec.notice(fmt.Sprintf("roofline: %s per device, for the model FLOPs utilization", p))
}

// account fills a period's tokens per second and MFU from its step rate.
func (tp *throughput) account(res *EpochResult) {
	if tp == nil || res.StepsPerSecond == 0 {
		return
	}
	res.TokensPerSecond = res.StepsPerSecond * float64(tp.samplesPerStep*tp.cost.TokensPerSample)
	res.MFU = roofline.Utilization(res.TokensPerSecond*tp.cost.TrainFLOPsPerToken, tp.peak, tp.devices)
}
