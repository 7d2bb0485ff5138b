package pjrthook

import (
	"crypto/sha256"
	"encoding/binary"
	"sync"
	"sync/atomic"
)

// The sharing piece: while a ShareCompiles window is open, a compile whose program, options,
// plugin and client match one already compiled in the window is answered by loading that one's
// serialized executable, so a caller that compiles many copies of one small program (the engine
// initializing variables one by one) pays one compile and cheap loads. The plugin's compile is
// deterministic for identical inputs, so the loaded executable is the one a compile would build.
type sharing struct {
	mu    sync.Mutex
	open  int                 // windows open
	blobs map[[32]byte][]byte // serialized executables of the window's compiles, by sharedKey
}

var shared sharing

// sharedLoads counts the compiles answered by loading a shared executable (Counts.Shared).
var sharedLoads atomic.Int64

// ShareCompiles opens a window in which identical compiles are compiled once; the returned
// func closes it (the last close drops the kept executables). Windows nest and are
// process-wide; outside every window each compile goes its usual way.
func ShareCompiles() (done func()) {
	shared.mu.Lock()
	shared.open++
	if shared.blobs == nil {
		shared.blobs = map[[32]byte][]byte{}
	}
	shared.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			shared.mu.Lock()
			defer shared.mu.Unlock()
			if shared.open--; shared.open == 0 {
				shared.blobs = nil
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

// compileShared is the call's compile: from a shared executable when a window holds one for
// it, else through the disk cache (when one is on) or the plugin, keeping the result for the
// window. A shared executable the plugin refuses is dropped and the program compiled; a failure
// to serialize only leaves that program unshared.
func (c *cgoCall) compileShared() (from source, err error) {
	shared.mu.Lock()
	open := shared.open > 0
	var key [32]byte
	var blob []byte
	if open {
		key = c.sharedKey()
		blob = shared.blobs[key]
	}
	shared.mu.Unlock()
	if blob != nil {
		if c.Load(blob) == nil {
			sharedLoads.Add(1)
			return fromShared, nil
		}
		shared.mu.Lock()
		if shared.blobs != nil {
			delete(shared.blobs, key)
		}
		shared.mu.Unlock()
	}
	from = compiledHere
	kept := &keepLoaded{cgoCall: c}
	if d := Disk(); d != nil {
		var fromDisk bool
		if fromDisk, err = d.Compile(kept); fromDisk {
			from = fromDiskCache
		}
	} else {
		err = c.Compile()
	}
	if err != nil || !open {
		return from, err
	}
	// A program the disk cache answered is shared as the bytes it loaded: the CPU plugin
	// serializes an executable it loaded into bytes that load but fail to run ("Function
	// wrapped_broadcast not found"), so only one it compiled here is serialized.
	b := kept.blob
	if from == compiledHere {
		if b, err = c.Serialize(); err != nil {
			return from, nil // unshared, still compiled
		}
	}
	if len(b) > 0 {
		shared.mu.Lock()
		if shared.blobs != nil {
			shared.blobs[key] = b
		}
		shared.mu.Unlock()
	}
	return from, nil
}

// keepLoaded is the call as the disk cache sees it, keeping the executable bytes it loads.
type keepLoaded struct {
	*cgoCall
	blob []byte
}

func (k *keepLoaded) Load(blob []byte) error {
	err := k.cgoCall.Load(blob)
	if err == nil {
		k.blob = blob
	}
	return err
}
