package promexport

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// endpoint is a /metrics server for one registry, in its own goroutine: the training Exporter's
// and ServeMetrics' alike.
type endpoint struct {
	srv      *http.Server
	addr     string
	done     chan struct{} // closed when Serve has returned
	serveErr error         // Serve's unexpected error; read after done is closed
}

// listen serves reg on addr's /metrics until shutdown; an empty or unusable address is an error
// naming it.
func listen(addr string, reg *prometheus.Registry) (*endpoint, error) {
	if addr == "" {
		return nil, errors.New(`promexport: listen on "": no address (want host:port, e.g. 127.0.0.1:9090)`)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("promexport: listen on %q: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	p := &endpoint{srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}, addr: ln.Addr().String(), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		if err := p.srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			p.serveErr = fmt.Errorf("promexport: serving on %s: %w", p.addr, err)
		}
	}()
	return p, nil
}

// shutdown stops the server, waiting for in-flight scrapes up to ShutdownTimeout (then closing
// them), and for its goroutine to end. Call it once.
func (p *endpoint) shutdown() error {
	ctx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
	defer cancel()
	var errs []error
	if err := p.srv.Shutdown(ctx); err != nil {
		errs = append(errs, fmt.Errorf("promexport: shutting down %s (connections closed forcibly): %w", p.addr, err))
		_ = p.srv.Close()
	}
	<-p.done
	return errors.Join(append([]error{p.serveErr}, errs...)...)
}
