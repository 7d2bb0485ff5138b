package pjrthook

import (
	"crypto/sha256"
	"encoding/binary"
	"sync"
	"sync/atomic"
	"unsafe"
)

// The sharing piece: while a ShareCompiles window is open, a compile whose program, options,
// plugin and client match one already compiled (or loaded from disk) in the window gets that
// same executable back, so a caller that compiles many copies of one small program (the engine
// initializing variables one by one) pays one compile and no loads. Each caller owns its handle
// as if it were its own: the executable is counted, and the plugin destroys it when the last
// holder does. The plugin's compile is deterministic for identical inputs, so the shared
// executable is the one a compile would build.
type sharing struct {
	mu    sync.Mutex
	open  int                         // windows open
	byKey map[[32]byte]unsafe.Pointer // the window's live executables, by sharedKey
	// holders counts the owners of each executable handed out more than once (absent: one).
	// It outlives the window: the handles do.
	holders map[heldKey]int
}

var shared = sharing{holders: map[heldKey]int{}}

// sharedLoads counts the compiles answered with a shared executable (Counts.Shared).
var sharedLoads atomic.Int64

// ShareCompiles opens a window in which identical compiles are compiled once; the returned
// func closes it (the last close forgets the window's programs; the executables handed out stay
// valid until their holders destroy them). Windows nest and are process-wide; outside every
// window each compile goes its usual way.
func ShareCompiles() (done func()) {
	shared.mu.Lock()
	shared.open++
	if shared.byKey == nil {
		shared.byKey = map[[32]byte]unsafe.Pointer{}
	}
	shared.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			shared.mu.Lock()
			defer shared.mu.Unlock()
			if shared.open--; shared.open == 0 {
				shared.byKey = nil
			}
		})
	}
}

// sharedKey digests what decides a compile's result. Each field is length-prefixed, so no two
// different calls share a digest by moving bytes between fields.
func (c *cgoCall) sharedKey() [32]byte {
	h := sha256.New()
	field := func(b []byte) {
		var n [8]byte
		binary.LittleEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	format, code := c.Program()
	field([]byte(format))
	field(code)
	field(c.Options())
	var ids [16]byte
	binary.LittleEndian.PutUint64(ids[:8], uint64(c.index))
	binary.LittleEndian.PutUint64(ids[8:], uint64(uintptr(c.args.client)))
	field(ids[:])
	var k [32]byte
	h.Sum(k[:0])
	return k
}

// compileShared is the call's compile: the window's executable for it when there is one, else
// through the disk cache (when one is on) or the plugin, the result kept for the window.
func (c *cgoCall) compileShared() (from source, err error) {
	shared.mu.Lock()
	open := shared.open > 0
	var key [32]byte
	if open {
		key = c.sharedKey()
		if exe := shared.byKey[key]; exe != nil {
			k := heldKey{c.index, uintptr(exe)}
			shared.holders[k] = max(shared.holders[k], 1) + 1
			shared.mu.Unlock()
			c.args.executable = exe
			c.loaded, c.client = exe, c.args.client
			sharedLoads.Add(1)
			return fromShared, nil
		}
	}
	shared.mu.Unlock()
	from = compiledHere
	if d := Disk(); d != nil {
		var fromDisk bool
		if fromDisk, err = d.Compile(c); fromDisk {
			from = fromDiskCache
		}
	} else {
		err = c.Compile()
	}
	if err == nil && open {
		shared.mu.Lock()
		if shared.byKey != nil {
			shared.byKey[key] = c.loaded
		}
		shared.mu.Unlock()
	}
	return from, err
}

// keepShared runs in the release hooks of an executable: true while other holders of a shared
// one remain (the plugin must not free it yet). The last holder's release forgets it, and the
// plugin frees it.
func keepShared(index int, exe unsafe.Pointer) bool {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	k := heldKey{index, uintptr(exe)}
	if n := shared.holders[k]; n > 1 {
		if n == 2 {
			delete(shared.holders, k)
		} else {
			shared.holders[k] = n - 1
		}
		return true
	}
	for key, e := range shared.byKey {
		if e == exe {
			delete(shared.byKey, key)
		}
	}
	return false
}
