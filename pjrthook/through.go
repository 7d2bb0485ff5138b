package pjrthook

/*
#include <stdlib.h>
#include "hook.h"
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// The tests' entries into the interposed tables: each call goes through the table gopjrt would
// use, so the hooks run as they do under GoMLX. cgo is not allowed in test files, hence here.

// indexOf is the binding index of plugin (registered before, by any path to its file).
func indexOf(plugin string) (int, error) {
	regMu.Lock()
	defer regMu.Unlock()
	_, _, r, ok, err := lookup(plugin)
	if err != nil {
		return -1, err
	}
	if !ok {
		return -1, fmt.Errorf("pjrthook: %s is not registered", plugin)
	}
	return r.index, nil
}

// createThrough calls PJRT_Client_Create on the interposed table of plugin with one option of
// the caller's own, as gopjrt would, and returns the client or the plugin's error message.
func createThrough(plugin, option string, value int64) (unsafe.Pointer, error) {
	index, err := indexOf(plugin)
	if err != nil {
		return nil, err
	}
	name := C.CString(option)
	defer C.free(unsafe.Pointer(name))
	var client unsafe.Pointer
	if e := C.nitro_hook_create_through(C.int(index), name, C.int64_t(value), &client); e != nil {
		c := &cgoCall{index: index}
		return nil, fmt.Errorf("PJRT_Client_Create: %s", c.message(e, true))
	}
	if client == nil {
		return nil, fmt.Errorf("PJRT_Client_Create returned no client")
	}
	return client, nil
}

// compileThrough compiles code on client through plugin's interposed PJRT_Client_Compile and
// returns the loaded executable.
func compileThrough(plugin string, client unsafe.Pointer, code string) (unsafe.Pointer, error) {
	return compileThroughWith(plugin, client, code, nil)
}

// compileThroughWith is compileThrough handing the plugin options as its serialized compile
// options.
func compileThroughWith(plugin string, client unsafe.Pointer, code string, options []byte) (unsafe.Pointer, error) {
	index, err := indexOf(plugin)
	if err != nil {
		return nil, err
	}
	cs := C.CString(code)
	defer C.free(unsafe.Pointer(cs))
	var opts *C.char
	if len(options) > 0 {
		opts = (*C.char)(C.CBytes(options))
		defer C.free(unsafe.Pointer(opts))
	}
	var loaded unsafe.Pointer
	if e := C.nitro_hook_compile_through(C.int(index), client, cs, C.size_t(len(code)), opts, C.size_t(len(options)), &loaded); e != nil {
		c := &cgoCall{index: index}
		return nil, fmt.Errorf("PJRT_Client_Compile: %s", c.message(e, true))
	}
	return loaded, nil
}

// The release slots a test calls through.
const (
	slotDestroyLoaded = C.NITRO_SLOT_LOADED_EXECUTABLE_DESTROY
	slotDestroyClient = C.NITRO_SLOT_CLIENT_DESTROY
)

// releaseThrough calls the interposed destroy-shaped slot of plugin on obj.
func releaseThrough(plugin string, slot int, obj unsafe.Pointer) error {
	index, err := indexOf(plugin)
	if err != nil {
		return err
	}
	if e := C.nitro_hook_release_through(C.int(index), C.int(slot), obj); e != nil {
		c := &cgoCall{index: index}
		return fmt.Errorf("slot %d: %s", slot, c.message(e, true))
	}
	return nil
}
