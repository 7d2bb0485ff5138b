// The parts of the PJRT C API ABI the interposer touches, declared from the published layout
// (pjrt_c_api.h, API major version 0) instead of including that header: the interposer calls
// XLA only through the real plugin's own function table. hook_test.go checks every offset below
// against the header gopjrt builds with.
#ifndef NITRO_PJRTHOOK_H
#define NITRO_PJRTHOOK_H

#include <stddef.h>
#include <stdint.h>

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
	void *executable; // out: a PJRT_LoadedExecutable*
} nitro_pjrt_compile_args;

// PJRT_NamedValue: one create option.
enum { NITRO_NAMED_STRING = 0, NITRO_NAMED_INT64 = 1 };
typedef struct {
	size_t struct_size;
	void *extension_start;
	const char *name;
	size_t name_size;
	int type; // PJRT_NamedValue_Type
	union {
		const char *string_value;
		int64_t int64_value;
		const void *other; // int64 list, float, bool: copied through, never read
	};
	size_t value_size;
} nitro_pjrt_named_value;

// PJRT_CallbackError: the plugin's own error constructor, handed to each key-value callback.
typedef void *(*nitro_callback_error)(int code, const char *message, size_t message_size);

// The key-value callbacks' arguments (PJRT_KeyValueGetCallback_Args and friends).
typedef struct {
	size_t struct_size;
	void *extension_start;
	const char *key;
	size_t key_size;
	int timeout_in_ms;
	nitro_callback_error *callback_error;
	void *user_arg;
	char *value;                        // out
	size_t value_size;                  // out
	void (*value_deleter_callback)(char *); // out
} nitro_kv_get_args;
typedef struct {
	size_t struct_size;
	void *extension_start;
	const char *key;
	size_t key_size;
	nitro_callback_error *callback_error;
	void *user_arg;
	char *value;                        // out
	size_t value_size;                  // out
	void (*value_deleter_callback)(char *); // out
} nitro_kv_try_get_args;
typedef struct {
	size_t struct_size;
	void *extension_start;
	const char *key;
	size_t key_size;
	const char *value;
	size_t value_size;
	nitro_callback_error *callback_error;
	void *user_arg;
} nitro_kv_put_args;

// PJRT_Client_Create_Args.
typedef struct {
	size_t struct_size;
	void *extension_start;
	const nitro_pjrt_named_value *create_options;
	size_t num_options;
	void *(*kv_get_callback)(nitro_kv_get_args *);
	void *kv_get_user_arg;
	void *(*kv_put_callback)(nitro_kv_put_args *);
	void *kv_put_user_arg;
	void *client; // out
	void *(*kv_try_get_callback)(nitro_kv_try_get_args *);
	void *kv_try_get_user_arg;
} nitro_pjrt_client_create_args;

// The function-pointer slots of PJRT_Api the interposer uses, by position after the version
// field. The C API only appends slots, so these positions hold for every major-version-0 plugin
// whose table is long enough (nitro_hook_bind checks struct_size).
enum {
	NITRO_SLOT_ERROR_DESTROY = 0,
	NITRO_SLOT_ERROR_MESSAGE = 1,
	NITRO_SLOT_CLIENT_CREATE = 10,
	NITRO_SLOT_CLIENT_DESTROY = 11,
	NITRO_SLOT_CLIENT_PLATFORM_NAME = 12,
	NITRO_SLOT_CLIENT_PROCESS_INDEX = 13,
	NITRO_SLOT_CLIENT_PLATFORM_VERSION = 14,
	NITRO_SLOT_CLIENT_DEVICES = 15,
	NITRO_SLOT_CLIENT_ADDRESSABLE_DEVICES = 16,
	NITRO_SLOT_CLIENT_COMPILE = 20,
	NITRO_SLOT_DEVICE_DESCRIPTION_ID = 23,
	NITRO_SLOT_DEVICE_DESCRIPTION_PROCESS_INDEX = 24,
	NITRO_SLOT_DEVICE_DESCRIPTION_KIND = 26,
	NITRO_SLOT_DEVICE_GET_DESCRIPTION = 29,
	NITRO_SLOT_EXECUTABLE_DESTROY = 40,
	NITRO_SLOT_EXECUTABLE_SERIALIZE = 49,
	NITRO_SLOT_LOADED_EXECUTABLE_DESTROY = 50,
	NITRO_SLOT_LOADED_EXECUTABLE_GET_EXECUTABLE = 51,
	NITRO_SLOT_LOADED_EXECUTABLE_DELETE = 53,
	NITRO_SLOT_EXECUTABLE_DESERIALIZE_AND_LOAD = 56,
	NITRO_SLOTS_USED = 57 // slots 0..56 must exist
};

typedef struct {
	size_t struct_size;
	void *extension_start;
	nitro_pjrt_version pjrt_api_version;
	void *slot[NITRO_SLOTS_USED];
} nitro_pjrt_api_head;

// How many different real plugins one process can interpose.
#define NITRO_HOOK_MAX_PLUGINS 4

// nitro_hook_bind dlopens the real plugin at real_path and returns a copy of its PJRT_Api table
// whose PJRT_Client_Compile calls the Go side (nitroHookCompile) with the plugin's index, and
// whose PJRT_LoadedExecutable_Destroy, PJRT_LoadedExecutable_Delete and PJRT_Client_Destroy first
// let the Go side finish a background serialization of what they free (nitroHookRelease). Binding
// the same path again returns the same table. NULL on error, with a message in err.
const void *nitro_hook_bind(const char *real_path, int *index, char *err, size_t err_len);

// Calls into the real plugin bound at index. Each returns a PJRT_Error* (NULL on success); the
// caller owns it and passes it to nitro_hook_error_message and nitro_hook_error_destroy, or back to
// PJRT's caller.
void *nitro_hook_real_compile(int index, nitro_pjrt_compile_args *args);
void *nitro_hook_serialize(int index, void *loaded, char **bytes, size_t *size);
void *nitro_hook_deserialize(int index, void *client, const char *bytes, size_t size, void **loaded);
void nitro_hook_destroy_loaded(int index, void *loaded);
void *nitro_hook_client_facts(int index, void *client, const char **platform, size_t *platform_size,
			      const char **version, size_t *version_size, int *process_index,
			      size_t *devices, const char **kind, size_t *kind_size);
// nitro_hook_client_devices lists every device of the client (PJRT_Client_Devices, all
// processes'): up to cap of their global ids and process indices into ids and procs, their count
// into n (which may exceed cap: call again with room), the client's process index, and the id of
// its first addressable device (-1 when it has none).
void *nitro_hook_client_devices(int index, void *client, int64_t *ids, int *procs, size_t cap, size_t *n,
				int *process_index, int64_t *first_addressable);
// nitro_hook_error_message copies at most len-1 bytes of the error's message into buf.
void nitro_hook_error_message(int index, void *error, char *buf, size_t len);
void nitro_hook_error_destroy(int index, void *error);
void nitro_hook_api_version(int index, int *major, int *minor);

// nitro_hook_set_distributed makes every later PJRT_Client_Create through the interposer one
// process of num_nodes: it adds the options node_id and num_nodes and the three key-value
// callbacks, which call the Go store. num_nodes <= 1 turns that off.
void nitro_hook_set_distributed(int node_id, int num_nodes);
// nitro_hook_create_through calls the interposed table's PJRT_Client_Create at index as a caller
// would, with one option of its own (name = value), and destroys nothing: the test's entry.
void *nitro_hook_create_through(int index, const char *name, int64_t value, void **client);

// nitro_hook_compile_through compiles code through the interposed table at index as gopjrt would;
// nitro_hook_release_through calls one of its destroy-shaped slots (a release hook's) on obj.
// The lifetime test's entries.
void *nitro_hook_compile_through(int index, void *client, const char *code, size_t code_size, const char *options,
				 size_t options_size, void **loaded);
void *nitro_hook_release_through(int index, int slot, void *obj);

// Offsets the layout test compares with pjrt_c_api.h.
size_t nitro_offset_slot(int slot);
size_t nitro_offset_program_in_args(void);
size_t nitro_offset_format_in_program(void);
size_t nitro_offset_executable_in_args(void);
size_t nitro_arg_layout(int i);

#endif
