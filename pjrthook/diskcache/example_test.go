package diskcache_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/nitro-go/nitro/pjrthook/diskcache"
)

// A folder's entries are listed, checked whole and cleared without a plugin: what
// `nitro cache ls|verify|clear` do.
func ExampleVerify() {
	dir, _ := os.MkdirTemp("", "compile-cache-")
	defer os.RemoveAll(dir)
	key := strings.Repeat("a", 64)
	_ = diskcache.WriteEntry(filepath.Join(dir, key+diskcache.EntryExt), diskcache.Meta{Key: key, Program: "nitro_gradient"}, []byte("executable"))
	// An entry stored under another key's name is foreign: verify removes it.
	other := strings.Repeat("b", 64)
	_ = diskcache.WriteEntry(filepath.Join(dir, other+diskcache.EntryExt), diskcache.Meta{Key: key, Program: "nitro_eval"}, []byte("executable"))

	ok, bad, _ := diskcache.Verify(dir, true)
	fmt.Println("whole:", ok, "removed:", len(bad))
	entries, _, _ := diskcache.List(dir)
	for _, e := range entries {
		fmt.Println(e.Program)
	}
	n, _, _ := diskcache.Clear(dir)
	fmt.Println("cleared:", n)
	// Output:
	// whole: 1 removed: 1
	// nitro_gradient
	// cleared: 1
}

// program is a stand-in for the interposer's compile: an executable that lives until its owner
// destroys it, so the cache may write its entry in the background.
type program struct {
	code, plugin string
	pending      *diskcache.PendingWrite
}

func (p *program) Program() (string, []byte) { return "mlir", []byte(p.code) }
func (p *program) Options() []byte           { return nil }
func (p *program) Plugin() string            { return p.plugin }
func (p *program) Target() (diskcache.Target, error) {
	return diskcache.Target{Platform: "cpu", Devices: 1}, nil
}
func (p *program) Compile() error                 { return nil }
func (p *program) Serialize() ([]byte, error)     { return []byte("executable of " + p.code), nil }
func (p *program) Load([]byte) error              { return nil }
func (p *program) Hold(w *diskcache.PendingWrite) { p.pending = w }

// destroy is the owner's side of the contract: the pending write first, then the executable.
func (p *program) destroy() {
	if p.pending != nil {
		p.pending.Finish()
	}
}

// A compile returns before its entry is written; Flush (or destroying the executable) waits
// for the write.
func ExampleCache_Flush() {
	dir, _ := os.MkdirTemp("", "compile-cache-")
	defer os.RemoveAll(dir)
	plugin := filepath.Join(dir, "plugin.so") // its SHA-256 is part of the key
	_ = os.WriteFile(plugin, []byte("a plugin"), 0o644)
	c, _ := diskcache.Open(diskcache.Options{Dir: dir})
	p := &program{code: "module @g {}", plugin: plugin}
	fromDisk, _ := c.Compile(p)
	c.Flush()
	_, n, _ := diskcache.Size(dir)
	fmt.Println("from disk:", fromDisk, "entries:", n)
	p.destroy()
	// Output:
	// from disk: false entries: 1
}
