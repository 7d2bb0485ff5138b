package cli

import (
	"os"
	"path/filepath"
	"testing"
)

// SetSourceRootForTest makes `nitro new` believe this binary was built from root ("" for a build
// with no checkout behind it), until restore is called.
func SetSourceRootForTest(root string) (restore func()) {
	old := sourceRoot
	sourceRoot = func() string { return root }
	return func() { sourceRoot = old }
}

// linkCheckoutPlugin links a project's .nitro/pjrt to a checkout that has a plugin, and does
// nothing for one that has none.
func TestLinkCheckoutPlugin(t *testing.T) {
	root, proj := t.TempDir(), t.TempDir()
	if got, err := linkCheckoutPlugin(proj, root); got != "" || err != nil {
		t.Fatalf("a checkout with no plugin: %q, %v; want nothing linked", got, err)
	}
	src := filepath.Join(root, ".nitro", "pjrt")
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "pjrt_c_api_cpu_plugin.so"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := linkCheckoutPlugin(proj, root)
	if err != nil || got != src {
		t.Fatalf("linkCheckoutPlugin: %q, %v; want %s", got, err, src)
	}
	if b, err := os.ReadFile(filepath.Join(proj, ".nitro", "pjrt", "pjrt_c_api_cpu_plugin.so")); err != nil || string(b) != "x" {
		t.Errorf("the project's .nitro/pjrt does not reach the checkout's plugin: %q, %v", b, err)
	}
}
