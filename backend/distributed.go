package backend

import (
	"fmt"
	"net"
	"sync"

	"github.com/nitro-go/nitro/pjrthook"
	"github.com/nitro-go/nitro/pjrthook/kvstore"
)

// Distribution is this process's place in a run of several, as the launcher gave it: the CUDA
// client it starts spans the run's processes (XLA's distributed runtime; the collectives inside
// the programs become NCCL's across hosts). The CPU plugin never gets it: a CPU run of several
// processes sums its gradients over MPI (core.WithCollective).
type Distribution struct {
	Rank, WorldSize int
	// Coordinator is rank 0's host:port: rank 0 serves the store there (on every interface, at
	// that port) and every rank connects to it.
	Coordinator string
}

var (
	distMu    sync.Mutex
	distNext  Distribution
	distStore pjrthook.Store
	distAddr  string
	distSrv   *kvstore.Server
)

// Distribute sets the distribution the next CUDA client starts under; a WorldSize of 1 (or 0)
// is one process. Call it before Resolve: the backend is created once per process, so a client
// already started keeps the distribution it had.
func Distribute(d Distribution) error {
	if d.WorldSize > 1 && (d.Rank < 0 || d.Rank >= d.WorldSize) {
		return fmt.Errorf("backend: rank %d is outside [0, %d)", d.Rank, d.WorldSize)
	}
	distMu.Lock()
	defer distMu.Unlock()
	distNext = d
	return nil
}

// spanProcesses turns the client-create piece on for one CUDA client start when the process is
// one of several; undo turns it off again, so no other plugin's client gets the options.
func spanProcesses() (undo func(), note string, err error) {
	distMu.Lock()
	defer distMu.Unlock()
	d := distNext
	if d.WorldSize <= 1 {
		return func() {}, "", nil
	}
	if d.Coordinator == "" {
		return nil, "", fmt.Errorf("process %d of %d on the CUDA plugin needs rank 0's address for XLA's distributed runtime: set NITRO_COORDINATOR=host:port (or the launcher's JAX_COORDINATOR_ADDRESS, or MASTER_ADDR and MASTER_PORT), the same on every rank", d.Rank, d.WorldSize)
	}
	if distStore == nil || distAddr != d.Coordinator {
		if d.Rank == 0 && distSrv == nil {
			_, port, err := net.SplitHostPort(d.Coordinator)
			if err != nil {
				return nil, "", fmt.Errorf("the coordinator address %q: %w (want host:port)", d.Coordinator, err)
			}
			// Kept for the process's life: the plugin meets the other ranks through the store
			// again when it sets up communicators, not only at client creation.
			if distSrv, err = kvstore.Serve(net.JoinHostPort("", port)); err != nil {
				return nil, "", err
			}
		}
		distStore, distAddr = pjrthook.StoreOf(kvstore.NewClient(d.Coordinator)), d.Coordinator
	}
	if err := pjrthook.SetDistributed(d.Rank, d.WorldSize, distStore); err != nil {
		return nil, "", err
	}
	return func() { pjrthook.SetDistributed(0, 1, nil) }, describe(d), nil
}

// describe is the distribution's clause in the backend's reason and errors, "" for one process.
func describe(d Distribution) string {
	if d.WorldSize <= 1 {
		return ""
	}
	return fmt.Sprintf("; process %d of %d (XLA's distributed runtime, store at %s)", d.Rank, d.WorldSize, d.Coordinator)
}

// distributionNote is describe of the distribution the next CUDA client starts under.
func distributionNote() string {
	distMu.Lock()
	defer distMu.Unlock()
	return describe(distNext)
}
