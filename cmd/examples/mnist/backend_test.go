package mnist_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nitro-go/nitro/backend"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/internal/prereq"
)

// wantBackend is the backend an automatic choice must land on: $NITRO_BACKEND when set, else xla
// when the plugin is installed, and in CI always (there a missing plugin is a failure, not a
// pure-Go pass). "Installed" is asked twice, of the search and of the repository's own .nitro/pjrt
// (where `make setup` puts it), so a search that broke is not taken as no plugin.
func wantBackend() string {
	if f := strings.ToLower(strings.TrimSpace(os.Getenv(backend.EnvBackend))); f != "" && f != "auto" {
		return f
	}
	if p, _, _ := backend.FindPlugin(); p != "" || prereq.CI() {
		return backend.XLA
	}
	if _, err := os.Stat(filepath.Join("..", "..", "..", ".nitro", "pjrt", backend.PluginFile)); err == nil {
		return backend.XLA
	}
	return backend.Go
}

// ranOn fails the test unless n runs on the backend wantBackend expects.
func ranOn(t *testing.T, n *core.Nitro) {
	t.Helper()
	if got, want := n.Backend().Name, wantBackend(); got != want {
		t.Fatalf("ran on backend %q (%s), want %q", got, n.Backend().Reason, want)
	}
}
