// Package shim is the C half of exportbundle's program capture: a copy of a real PJRT plugin's
// function table whose PJRT_Client_Compile records the program it is handed, then forwards it.
// It is linked into the Go binary through cgo (no separate .so, no compiler at run time) and
// registered with gopjrt through its public pjrt.RegisterPreloadedPlugin.
package shim

/*
#cgo LDFLAGS: -ldl
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"errors"
	"unsafe"
)

// Program is one recorded PJRT_Program: its format ("mlir", "hlo", ...) and its code, copied.
type Program struct {
	Format string
	Code   []byte
}

// API returns the address of the shim's PJRT_Api table forwarding to the plugin at realPath
// (an absolute path). Only one real plugin per process can be bound.
func API(realPath string) (uintptr, error) {
	cpath := C.CString(realPath)
	defer C.free(unsafe.Pointer(cpath))
	var buf [512]C.char
	api := C.nitro_capture_api(cpath, &buf[0], C.size_t(len(buf)))
	if api == nil {
		return 0, errors.New(C.GoString(&buf[0]))
	}
	return uintptr(api), nil
}

// Arm starts recording (dropping anything recorded before); Disarm stops and drops the records.
func Arm()    { C.nitro_capture_arm(0); C.nitro_capture_arm(1) }
func Disarm() { C.nitro_capture_arm(0) }

// Recorded returns copies of the programs recorded since Arm, in compile order.
func Recorded() []Program {
	n := int(C.nitro_capture_count())
	out := make([]Program, 0, n)
	for i := 0; i < n; i++ {
		var format, code *C.char
		var formatSize, codeSize C.size_t
		if C.nitro_capture_get(C.size_t(i), &format, &formatSize, &code, &codeSize) == 0 {
			break
		}
		out = append(out, Program{
			Format: string(C.GoBytes(unsafe.Pointer(format), C.int(formatSize))),
			Code:   C.GoBytes(unsafe.Pointer(code), C.int(codeSize)),
		})
	}
	return out
}

// Offsets reports where the shim believes PJRT_Api.PJRT_Client_Compile,
// PJRT_Client_Compile_Args.program and PJRT_Program.format lie, for the layout test.
func Offsets() (clientCompile, programInArgs, formatInProgram uintptr) {
	return uintptr(C.nitro_offset_client_compile()), uintptr(C.nitro_offset_program_in_args()),
		uintptr(C.nitro_offset_format_in_program())
}
