package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nitro-go/nitro/backend"
	"github.com/nitro-go/nitro/pjrthook/diskcache"
)

// nitro cache ls, verify and clear over a folder of two entries, one of them damaged.
func TestCacheCommands(t *testing.T) {
	dir := t.TempDir()
	keys := []string{strings.Repeat("a", 64), strings.Repeat("b", 64)}
	for i, k := range keys {
		m := diskcache.Meta{Key: k, Program: []string{"nitro_gradient", "nitro_optimizer"}[i]}
		if err := diskcache.WriteEntry(filepath.Join(dir, k+diskcache.EntryExt), m, []byte("executable")); err != nil {
			t.Fatal(err)
		}
	}
	code, out, errs := runCLI("cache", "ls", "--dir", dir)
	if code != 0 || !strings.Contains(out, "2 entries") || !strings.Contains(out, "nitro_gradient") || !strings.Contains(out, "nitro_optimizer") {
		t.Fatalf("cache ls: %d\n%s%s", code, out, errs)
	}
	damaged := filepath.Join(dir, keys[1]+diskcache.EntryExt)
	data, _ := os.ReadFile(damaged)
	data[len(data)-1] ^= 1
	os.WriteFile(damaged, data, 0o644)
	code, out, errs = runCLI("cache", "verify", "--dir", dir)
	if code != 0 || !strings.Contains(out, "1 entries whole, 1 removed") || !strings.Contains(out, "checksum mismatch") {
		t.Fatalf("cache verify: %d\n%s%s", code, out, errs)
	}
	if _, err := os.Stat(damaged); !os.IsNotExist(err) {
		t.Fatal("verify left the damaged entry")
	}
	code, out, errs = runCLI("cache", "clear", "--dir", dir)
	if code != 0 || !strings.Contains(out, "removed 1 entries") {
		t.Fatalf("cache clear: %d\n%s%s", code, out, errs)
	}
	// Without --dir the folder is $NITRO_COMPILE_CACHE; "off" names no folder.
	t.Setenv(backend.EnvCompileCache, dir)
	if code, out, _ = runCLI("cache", "ls"); code != 0 || !strings.Contains(out, dir+": 0 entries") {
		t.Fatalf("cache ls on $%s: %d %s", backend.EnvCompileCache, code, out)
	}
	t.Setenv(backend.EnvCompileCache, "off")
	if code, _, errs = runCLI("cache", "ls"); code == 0 || !strings.Contains(errs, "--dir") {
		t.Fatalf("cache ls with the cache off: %d %s", code, errs)
	}
}
