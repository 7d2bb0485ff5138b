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
