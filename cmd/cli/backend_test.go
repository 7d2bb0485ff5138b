package cli_test

import (
	"os"
	"regexp"
	"testing"

	"github.com/nitro-go/nitro/core/backend"
)

var backendLine = regexp.MustCompile(`(?m)^  backend +(\S+) `)

// wantBackend checks the backend a train or evaluate run names in its banner (out is its
// stdout). With the XLA plugin installed, and always in CI, it must be xla: a run that fell back
// to pure Go because plugin discovery broke would otherwise pass unnoticed.
func wantBackend(t *testing.T, out string) {
	t.Helper()
	want := "go"
	if p, _ := backend.FindPlugin(); p != "" || os.Getenv("CI") != "" {
		want = "xla"
	}
	m := backendLine.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("the run names no backend in its banner:\n%s", out)
	}
	if m[1] != want {
		t.Errorf("the run used backend %q, want %q (CI=%q)", m[1], want, os.Getenv("CI"))
	}
}
