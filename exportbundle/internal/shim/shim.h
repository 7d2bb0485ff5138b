// The few parts of the PJRT C API ABI the capture shim touches, declared here from the published
// layout (xla/pjrt/c/pjrt_c_api.h, API major version 0) rather than by including that header:
// the shim never calls into XLA except through the real plugin's own function table.
#ifndef NITRO_EXPORTBUNDLE_SHIM_H
#define NITRO_EXPORTBUNDLE_SHIM_H

#include <stddef.h>

// PJRT_Api_Version.
typedef struct {
	size_t struct_size;
	void *extension_start;
	int major_version;
	int minor_version;
} nitro_pjrt_version;

// PJRT_Program: the program handed to PJRT_Client_Compile.
typedef struct {
	size_t struct_size;
	void *extension_start;
	char *code;
	size_t code_size;
	const char *format;
	size_t format_size;
} nitro_pjrt_program;

// PJRT_Client_Compile_Args.
typedef struct {
	size_t struct_size;
	void *extension_start;
	void *client;
	const nitro_pjrt_program *program;
	const char *compile_options;
	size_t compile_options_size;
	void *executable;
} nitro_pjrt_compile_args;

// A PJRT_Error* is opaque here: it is only passed back to the caller.
typedef void *(*nitro_pjrt_compile_fn)(nitro_pjrt_compile_args *);

// The head of PJRT_Api up to and including PJRT_Client_Compile: 20 function pointers precede it
// (PJRT_Error_Destroy .. PJRT_Client_AddressableMemories). The PJRT C API only appends fields, so
// this prefix is stable for major version 0.
#define NITRO_PJRT_SLOTS_BEFORE_COMPILE 20
typedef struct {
	size_t struct_size;
	void *extension_start;
	nitro_pjrt_version pjrt_api_version;
	void *slots_before_compile[NITRO_PJRT_SLOTS_BEFORE_COMPILE];
	nitro_pjrt_compile_fn client_compile;
} nitro_pjrt_api_head;

// nitro_capture_api dlopens the real plugin at real_path and returns a copy of its PJRT_Api table
// whose PJRT_Client_Compile records each program before forwarding it. One real plugin per
// process: a second, different path is refused. NULL on error, with a message in err.
const void *nitro_capture_api(const char *real_path, char *err, size_t err_len);

// Recording is off until armed; nitro_capture_arm(0) disarms and drops what was recorded.
void nitro_capture_arm(int on);

// The programs recorded since arming, in compile order.
size_t nitro_capture_count(void);
int nitro_capture_get(size_t i, const char **format, size_t *format_size, const char **code,
		      size_t *code_size);

// Offsets of the fields the shim relies on, for the layout test.
size_t nitro_offset_client_compile(void);
size_t nitro_offset_program_in_args(void);
size_t nitro_offset_format_in_program(void);

#endif
