package cli_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/nitro-go/nitro/backend"
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
	if _, err := os.Stat(filepath.Join("..", "..", ".nitro", "pjrt", backend.PluginFile)); err == nil {
		return backend.XLA
	}
	return backend.Go
}

var backendRow = regexp.MustCompile(`(?m)^\s*backend\s+(\w+) \(`)

// ranOn fails the test unless the run's config report (in out) names the backend wantBackend
// expects: an end-to-end run that fell back to pure Go must not pass as an XLA run.
func ranOn(t *testing.T, what, out string) {
	t.Helper()
	m := backendRow.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("%s: no backend row in the config report:\n%s", what, out)
	}
	if want := wantBackend(); m[1] != want {
		t.Fatalf("%s ran on backend %q, want %q", what, m[1], want)
	}
}
