package promexport

import (
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// ServeMetrics is a model server's metrics (nitro serve --metrics-addr), in Prometheus's
// conventions: nitro_serve_requests_total{model,protocol,code} and
// nitro_serve_request_failures_total{model,protocol} (an answer of 400 or more) are counters,
// nitro_serve_request_duration_seconds{model} a histogram of the time from a request's headers
// to its answer, nitro_serve_requests_in_flight a gauge, and nitro_serve_rejected_total{limit}
// the requests a server bound refused (max_reading: 503 busy; max_request_bytes: 413;
// body_timeout: 408, stalled or under the minimum rate). It is told by the server through
// RequestStarted and RequestDone (exportbundle.ServeObserver's methods), safe for concurrent use.
type ServeMetrics struct {
	reg        *prometheus.Registry
	ep         *endpoint
	collectors []prometheus.Collector
	requests   *prometheus.CounterVec
	failures   *prometheus.CounterVec
	latency    *prometheus.HistogramVec
	inFlight   prometheus.Gauge
	rejected   *prometheus.CounterVec

	closeOnce sync.Once
	closeErr  error
}

// ServeLimits are the rejected-by-limit label values, each present from the start at 0.
var ServeLimits = []string{"max_reading", "max_request_bytes", "body_timeout"}

// latencyBuckets span a small model's batch-1 answer (under a millisecond) to a large batch
// that queued (seconds).
var latencyBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// NewServeMetrics registers the nitro_serve_* collectors on opts.Registry (or a fresh one) and
// serves them on opts.Addr's /metrics until Close (CacheStats is not used). An empty or unusable
// address, or a registry already holding them, is an error.
func NewServeMetrics(opts Options) (*ServeMetrics, error) {
	reg := opts.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	m := &ServeMetrics{
		reg: reg,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "nitro_serve_requests_total",
			Help: "Inference requests answered, by model, protocol (predict, v2) and HTTP status code."}, []string{"model", "protocol", "code"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "nitro_serve_request_failures_total",
			Help: "Inference requests answered with a status of 400 or more, by model and protocol."}, []string{"model", "protocol"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "nitro_serve_request_duration_seconds",
			Help: "Seconds from an inference request's headers to its answer, by model.", Buckets: latencyBuckets}, []string{"model"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{Name: "nitro_serve_requests_in_flight",
			Help: "Inference requests begun and not yet answered."}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "nitro_serve_rejected_total",
			Help: "Inference requests refused by a server bound: max_reading (503), max_request_bytes (413), body_timeout (408)."}, []string{"limit"}),
	}
	for _, l := range ServeLimits {
		m.rejected.WithLabelValues(l)
	}
	m.collectors = []prometheus.Collector{m.requests, m.failures, m.latency, m.inFlight, m.rejected}
	for i, c := range m.collectors {
		if err := reg.Register(c); err != nil {
			for _, done := range m.collectors[:i] {
				reg.Unregister(done)
			}
			return nil, errors.Join(errors.New("promexport: registering the nitro_serve_* collectors"), err)
		}
	}
	ep, err := listen(opts.Addr, reg)
	if err != nil {
		for _, c := range m.collectors {
			reg.Unregister(c)
		}
		return nil, err
	}
	m.ep = ep
	return m, nil
}

// Addr is the address /metrics is served on, with the port it bound.
func (m *ServeMetrics) Addr() string { return m.ep.addr }

// RequestStarted counts a request in flight.
func (m *ServeMetrics) RequestStarted() { m.inFlight.Inc() }

// RequestDone records a request answered with status after d; limit names the server bound that
// refused it ("" for none). model is "" for a request that named no model served.
func (m *ServeMetrics) RequestDone(model, protocol string, status int, limit string, d time.Duration) {
	m.inFlight.Dec()
	m.requests.WithLabelValues(model, protocol, strconv.Itoa(status)).Inc()
	if status >= 400 {
		m.failures.WithLabelValues(model, protocol).Inc()
	}
	m.latency.WithLabelValues(model).Observe(d.Seconds())
	if limit != "" {
		m.rejected.WithLabelValues(limit).Inc()
	}
}

// Close stops serving /metrics (as Exporter.Close does) and unregisters the collectors.
func (m *ServeMetrics) Close() error {
	m.closeOnce.Do(func() {
		m.closeErr = m.ep.shutdown()
		for _, c := range m.collectors {
			m.reg.Unregister(c)
		}
	})
	return m.closeErr
}
