package pjrthook

/*
#cgo LDFLAGS: -ldl
#include <stdlib.h>
#include "hook.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/gomlx/gopjrt/pjrt"

	"github.com/nitro-go/nitro/pjrthook/diskcache"
)

// namePrefix makes a registered name an absolute path: GoMLX's stablehlo backend hands such a
// name to gopjrt's GetPlugin as is (no plugin-directory search), and GetPlugin finds it among
// the plugins already registered.
const namePrefix = "/nitro-pjrthook"

// The plugin slots. The C side has NITRO_HOOK_MAX_PLUGINS bindings, each a copy of one real
// plugin's PJRT_Api whose hooks name their binding's index as a constant (C has no closures).
// gopjrt keeps a registered table for the process's life (RegisterPreloadedPlugin has no
// undo; GetPlugin hands out the same *pjrt.Plugin, which calls through that table unlocked), so
// a binding is never released: given to another plugin after its clients were destroyed, a
// later client started under the old name (or a create already past its table read) would run
// the other plugin's functions. Slots are bounded instead by reuse: one binding per plugin file,
// told by its device and inode, so every later client of that file shares it, however the path
// is spelled (a link to it in each trial's or model's folder, an unclean or relative path, a hard
// link). A process can then run out only by loading more than four different plugin files.
var (
	regMu   sync.Mutex
	regFile = map[fileID]registered{} // plugin file -> its binding
	regIdx  = map[int]string{}        // binding index -> the plugin file's resolved path
)

// fileID names a file whatever path reaches it.
type fileID struct{ dev, ino uint64 }

type registered struct {
	name  string
	index int
}

// identify resolves plugin to its file: the path with no links or dots left, and its identity.
func identify(plugin string) (string, fileID, error) {
	abs, err := filepath.Abs(plugin)
	if err != nil {
		return "", fileID{}, err
	}
	file, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", fileID{}, err
	}
	st, err := os.Stat(file)
	if err != nil {
		return "", fileID{}, err
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		return file, fileID{dev: uint64(sys.Dev), ino: uint64(sys.Ino)}, nil
	}
	return file, fileID{}, errors.New("no device and inode to tell the plugin file by")
}

// lookup is plugin's binding, if it has one; regMu is held.
func lookup(plugin string) (file string, id fileID, r registered, ok bool, err error) {
	if file, id, err = identify(plugin); err != nil {
		return "", fileID{}, registered{}, false, err
	}
	r, ok = regFile[id]
	return file, id, r, ok, nil
}

// Register binds the interposer over the PJRT plugin at realPlugin (the path of the .so; a
// relative one is taken from the working directory) and registers it with gopjrt; it returns the
// plugin name to hand to GoMLX (for example stablehlo.NewWithOptions(name, opts)). Registering
// the same plugin file again, by any path, returns the same name and binds nothing new (see
// regFile): a process that starts clients again and again holds one slot per plugin file. A
// process can interpose at most four different plugin files.
func Register(realPlugin string) (string, error) {
	regMu.Lock()
	defer regMu.Unlock()
	file, id, r, ok, err := lookup(realPlugin)
	if err != nil {
		return "", fmt.Errorf("pjrthook: interposing %s: %w", realPlugin, err)
	}
	if ok {
		return r.name, nil
	}
	cpath := C.CString(file)
	defer C.free(unsafe.Pointer(cpath))
	var buf [512]C.char
	var index C.int
	api := C.nitro_hook_bind(cpath, &index, &buf[0], C.size_t(len(buf)))
	if api == nil {
		return "", fmt.Errorf("pjrthook: interposing %s: %s", realPlugin, C.GoString(&buf[0]))
	}
	name := namePrefix + file
	if err := pjrt.RegisterPreloadedPlugin(name, uintptr(api)); err != nil {
		return "", fmt.Errorf("pjrthook: registering the interposer over %s: %w", realPlugin, err)
	}
	regFile[id] = registered{name: name, index: int(index)}
	regIdx[int(index)] = file
	return name, nil
}

// Plugins lists the real plugin files interposed so far (by their resolved paths), one a slot.
func Plugins() []string {
	regMu.Lock()
	defer regMu.Unlock()
	out := make([]string, 0, len(regIdx))
	for i := 0; i < len(regIdx); i++ {
		out = append(out, regIdx[i])
	}
	return out
}

func pluginPath(index int) string {
	regMu.Lock()
	defer regMu.Unlock()
	return regIdx[index]
}

// nitroHookCompile is PJRT_Client_Compile of every interposed plugin: the aliasing piece adds
// the declared input/output aliases, the capture piece sees the program, the disk cache (when one is on) answers from disk or compiles and writes, and the real
// plugin's own error, if any, goes back to PJRT's caller unchanged.
//
//export nitroHookCompile
func nitroHookCompile(index C.int, args *C.nitro_pjrt_compile_args) unsafe.Pointer {
	c := &cgoCall{index: int(index), args: args}
	if c.isXProcess() { // xprocess.go: widened over the processes, never from disk
		return c.compileXProcess()
	}
	defer c.applyAliases()() // alias.go: before the disk cache keys the program
	start := time.Now()
	from, err := c.compileShared() // shared.go: the sharing piece, then the disk cache or the plugin
	if err == nil {
		count(from, time.Since(start))
		capture.record(c)
		return nil
	}
	var pe *pjrtError
	if errors.As(err, &pe) && pe.ptr != nil {
		return pe.ptr
	}
	return nil // unreachable: only the real compile fails a call
}

// pjrtError is an error the real plugin returned; ptr goes back to PJRT's caller, who owns it.
type pjrtError struct {
	ptr unsafe.Pointer
	msg string
}

func (e *pjrtError) Error() string { return e.msg }

// cgoCall is one intercepted compile, over the real plugin at index. args is the caller's and
// valid only during the compile; loaded and client outlive it, for a background serialization.
type cgoCall struct {
	index  int
	args   *C.nitro_pjrt_compile_args
	prog   *Program
	loaded unsafe.Pointer // the PJRT_LoadedExecutable compiled or loaded
	client unsafe.Pointer
}

var (
	_ diskcache.Call   = (*cgoCall)(nil)
	_ diskcache.Holder = (*cgoCall)(nil)
)

// held are the background writes of executables still alive, by plugin index and
// PJRT_LoadedExecutable: its destroy (or its client's) finishes the write first.
var (
	heldMu sync.Mutex
	held   = map[heldKey]heldWrite{}
)

type heldKey struct {
	index  int
	loaded uintptr
}

type heldWrite struct {
	client uintptr
	w      *diskcache.PendingWrite
}

// Hold keeps the executable alive for w: the release hooks finish w before the plugin frees it.
func (c *cgoCall) Hold(w *diskcache.PendingWrite) {
	heldMu.Lock()
	held[heldKey{c.index, uintptr(c.loaded)}] = heldWrite{client: uintptr(c.client), w: w}
	heldMu.Unlock()
}

// nitroHookRelease runs in the interposed PJRT_LoadedExecutable_Destroy and _Delete (obj is the
// executable) and PJRT_Client_Destroy (obj is the client, isClient set) before the real one. It
// returns 1 when the plugin must not free obj now: the executable is shared and other holders
// remain (shared.go), or (destroy set: PJRT_LoadedExecutable_Destroy) its entry is still waiting
// to be written, and the write destroys it when done, so a start that frees a program right after
// running it (a variable's initializer) does not wait for its serialization. Otherwise it
// finishes the background writes that still read what is about to be freed, and returns 0.
//
//export nitroHookRelease
func nitroHookRelease(index C.int, obj unsafe.Pointer, isClient, destroy C.int) C.int {
	if isClient == 0 && keepShared(int(index), obj) {
		return 1
	}
	var todo []*diskcache.PendingWrite
	heldMu.Lock()
	if isClient == 0 {
		k := heldKey{int(index), uintptr(obj)}
		if h, ok := held[k]; ok {
			if destroy != 0 && h.w.Defer(func() { forget(k, h.w); C.nitro_hook_destroy_loaded(index, obj) }) {
				heldMu.Unlock()
				return 1
			}
			todo = append(todo, h.w)
			delete(held, k)
		}
	} else {
		// A write that took over its executable's destroy is among these: finishing it frees
		// the executable before its client goes.
		for k, h := range held {
			if k.index == int(index) && h.client == uintptr(obj) {
				todo = append(todo, h.w)
				delete(held, k)
			}
		}
	}
	heldMu.Unlock()
	for _, w := range todo {
		w.Finish()
	}
	return 0
}

// forget drops k's held write once it is done, unless k already names another.
func forget(k heldKey, w *diskcache.PendingWrite) {
	heldMu.Lock()
	if h, ok := held[k]; ok && h.w == w {
		delete(held, k)
	}
	heldMu.Unlock()
}

// Flush writes every compiled executable's entry still queued in the background, and returns
// once they are on disk (or failed, and said). Call it before a process ends normally: one that
// exits first leaves those entries missing (a compile next time), never torn.
func Flush() {
	heldMu.Lock()
	todo := make([]*diskcache.PendingWrite, 0, len(held))
	for _, h := range held {
		todo = append(todo, h.w)
	}
	heldMu.Unlock()
	for _, w := range todo {
		w.Finish()
	}
	if d := Disk(); d != nil {
		d.Flush()
	}
}

// Program copies the program handed to Compile (once per call).
func (c *cgoCall) Program() (format string, code []byte) {
	if c.prog == nil {
		p := c.args.program
		c.prog = &Program{}
		if p != nil {
			c.prog.Format = string(C.GoBytes(unsafe.Pointer(p.format), C.int(p.format_size)))
			c.prog.Code = C.GoBytes(unsafe.Pointer(p.code), C.int(p.code_size))
		}
	}
	return c.prog.Format, c.prog.Code
}

func (c *cgoCall) Options() []byte {
	return C.GoBytes(unsafe.Pointer(c.args.compile_options), C.int(c.args.compile_options_size))
}

func (c *cgoCall) Plugin() string { return pluginPath(c.index) }

// message reads a PJRT error's text; destroy frees it when the error stays with us.
func (c *cgoCall) message(e unsafe.Pointer, destroy bool) string {
	var buf [1024]C.char
	C.nitro_hook_error_message(C.int(c.index), e, &buf[0], C.size_t(len(buf)))
	if destroy {
		C.nitro_hook_error_destroy(C.int(c.index), e)
	}
	return C.GoString(&buf[0])
}

func (c *cgoCall) Compile() error {
	if e := C.nitro_hook_real_compile(C.int(c.index), c.args); e != nil {
		return &pjrtError{ptr: e, msg: c.message(e, false)}
	}
	c.loaded, c.client = c.args.executable, c.args.client
	return nil
}

func (c *cgoCall) Serialize() ([]byte, error) {
	var bytes *C.char
	var size C.size_t
	if e := C.nitro_hook_serialize(C.int(c.index), c.loaded, &bytes, &size); e != nil {
		return nil, errors.New(c.message(e, true))
	}
	if bytes == nil {
		return nil, errors.New("the plugin does not serialize executables")
	}
	defer C.free(unsafe.Pointer(bytes))
	return C.GoBytes(unsafe.Pointer(bytes), C.int(size)), nil
}

func (c *cgoCall) Load(blob []byte) error {
	if len(blob) == 0 {
		return errors.New("empty executable")
	}
	cb := C.CBytes(blob)
	defer C.free(cb)
	var loaded unsafe.Pointer
	if e := C.nitro_hook_deserialize(C.int(c.index), c.args.client, (*C.char)(cb), C.size_t(len(blob)), &loaded); e != nil {
		return errors.New(c.message(e, true))
	}
	if loaded == nil {
		return errors.New("the plugin loaded no executable")
	}
	c.args.executable = loaded
	c.loaded, c.client = loaded, c.args.client
	return nil
}

func (c *cgoCall) Target() (diskcache.Target, error) {
	var platform, version, kind *C.char
	var platformSize, versionSize, kindSize, devices C.size_t
	var process C.int
	if e := C.nitro_hook_client_facts(C.int(c.index), c.args.client, &platform, &platformSize, &version,
		&versionSize, &process, &devices, &kind, &kindSize); e != nil {
		return diskcache.Target{}, errors.New(c.message(e, true))
	}
	var major, minor C.int
	C.nitro_hook_api_version(C.int(c.index), &major, &minor)
	return diskcache.Target{
		Platform:        C.GoStringN(platform, C.int(platformSize)),
		PlatformVersion: C.GoStringN(version, C.int(versionSize)),
		APIVersion:      fmt.Sprintf("%d.%d", int(major), int(minor)),
		Devices:         int(devices),
		DeviceKind:      C.GoStringN(kind, C.int(kindSize)),
		ProcessIndex:    int(process),
	}, nil
}

// slotOffset and friends report the layout the C side assumes, for the layout test.
func slotOffset(slot int) uintptr    { return uintptr(C.nitro_offset_slot(C.int(slot))) }
func programInArgsOffset() uintptr   { return uintptr(C.nitro_offset_program_in_args()) }
func formatInProgramOffset() uintptr { return uintptr(C.nitro_offset_format_in_program()) }
func executableInArgsOffset() uintptr {
	return uintptr(C.nitro_offset_executable_in_args())
}

func argLayout(i int) uintptr { return uintptr(C.nitro_arg_layout(C.int(i))) }
