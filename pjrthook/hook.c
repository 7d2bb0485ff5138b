// The interposer: per real plugin, a copy of its PJRT_Api table whose PJRT_Client_Compile goes to
// the Go side first. Every other entry (and every extension) is the real plugin's own, so clients,
// buffers and executables are the real plugin's objects. C has no closures, so each of the
// NITRO_HOOK_MAX_PLUGINS bindings has its own small compile function that names its index.
#include "hook.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "_cgo_export.h"

typedef const void *(*get_api_fn)(void);
typedef void *(*pjrt_fn)(void *args);

typedef struct {
	char *path;
	const nitro_pjrt_api_head *real;
	nitro_pjrt_api_head *copy; // never freed: gopjrt keeps the table
} binding;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static binding bound[NITRO_HOOK_MAX_PLUGINS];
static int n_bound;

// Argument structs of the calls below (pjrt_c_api.h field order).
typedef struct {
	size_t struct_size;
	void *extension_start;
	void *error;
	const char *message;
	size_t message_size;
} error_message_args;
typedef struct {
	size_t struct_size;
	void *extension_start;
	void *error;
} error_destroy_args;
typedef struct {
	size_t struct_size;
	void *extension_start;
	void *client;
	const char *out;
	size_t out_size;
} client_string_args; // PlatformName and PlatformVersion share this shape
typedef struct {
	size_t struct_size;
	void *extension_start;
	void *client;
	int process_index;
} client_process_index_args;
typedef struct {
	size_t struct_size;
	void *extension_start;
	void *client;
	void *const *devices;
	size_t num_devices;
} client_devices_args;
typedef struct {
	size_t struct_size;
	void *extension_start;
	void *device;
	void *description;
} device_description_args;
typedef struct {
	size_t struct_size;
	void *extension_start;
	void *description;
	const char *kind;
	size_t kind_size;
} description_kind_args;
typedef struct {
	size_t struct_size;
	void *extension_start;
	void *loaded;
	void *executable;
} get_executable_args;
typedef struct {
	size_t struct_size;
	void *extension_start;
	void *executable;
} destroy_args; // Executable_Destroy and LoadedExecutable_Destroy
typedef struct {
	size_t struct_size;
	void *extension_start;
	const void *executable;
	const char *bytes;
	size_t size;
	void *serialized;
	void (*deleter)(void *serialized);
} serialize_args;
typedef struct {
	size_t struct_size;
	void *extension_start;
	void *client;
	const char *bytes;
	size_t size;
	void *loaded;
	const char *options;
	size_t options_size;
} deserialize_args;

static void *call(int index, int slot, void *args) {
	return ((pjrt_fn)bound[index].real->slot[slot])(args);
}

#define HOOK_COMPILE(i) \
	static void *hook_compile_##i(nitro_pjrt_compile_args *args) { return nitroHookCompile(i, args); }
HOOK_COMPILE(0)
HOOK_COMPILE(1)
HOOK_COMPILE(2)
HOOK_COMPILE(3)
static void *const compile_fns[NITRO_HOOK_MAX_PLUGINS] = {
	(void *)hook_compile_0, (void *)hook_compile_1, (void *)hook_compile_2, (void *)hook_compile_3};

const void *nitro_hook_bind(const char *real_path, int *index, char *err, size_t err_len) {
	const void *out = NULL;
	pthread_mutex_lock(&mu);
	for (int i = 0; i < n_bound; i++) {
		if (strcmp(bound[i].path, real_path) == 0) {
			*index = i;
			out = bound[i].copy;
			goto done;
		}
	}
	if (n_bound == NITRO_HOOK_MAX_PLUGINS) {
		snprintf(err, err_len, "the interposer already forwards to %d plugins in this process, its most", n_bound);
		goto done;
	}
	void *h = dlopen(real_path, RTLD_LAZY | RTLD_LOCAL);
	if (h == NULL) {
		const char *e = dlerror();
		snprintf(err, err_len, "dlopen: %s", e ? e : "unknown error");
		goto done;
	}
	get_api_fn get = (get_api_fn)dlsym(h, "GetPjrtApi");
	if (get == NULL) {
		snprintf(err, err_len, "%s exports no GetPjrtApi: not a PJRT plugin", real_path);
		goto close;
	}
	const nitro_pjrt_api_head *real = get();
	if (real == NULL) {
		snprintf(err, err_len, "%s: GetPjrtApi returned NULL", real_path);
		goto close;
	}
	if (real->pjrt_api_version.major_version != 0) {
		snprintf(err, err_len, "%s: PJRT C API major version %d, the interposer knows the layout of 0 only",
			 real_path, real->pjrt_api_version.major_version);
		goto close;
	}
	if (real->struct_size < sizeof(nitro_pjrt_api_head)) {
		snprintf(err, err_len, "%s: PJRT_Api of %zu bytes is older than the interposer needs (%zu)", real_path,
			 real->struct_size, sizeof(nitro_pjrt_api_head));
		goto close;
	}
	for (int s = 0; s < NITRO_SLOTS_USED; s++) {
		if (real->slot[s] == NULL && (s == NITRO_SLOT_CLIENT_COMPILE || s == NITRO_SLOT_ERROR_MESSAGE ||
					      s == NITRO_SLOT_ERROR_DESTROY)) {
			snprintf(err, err_len, "%s: PJRT_Api slot %d is empty", real_path, s);
			goto close;
		}
	}
	nitro_pjrt_api_head *copy = malloc(real->struct_size);
	char *path = strdup(real_path);
	if (copy == NULL || path == NULL) {
		free(copy);
		free(path);
		snprintf(err, err_len, "out of memory");
		goto close;
	}
	memcpy(copy, real, real->struct_size);
	copy->slot[NITRO_SLOT_CLIENT_COMPILE] = compile_fns[n_bound];
	bound[n_bound].path = path;
	bound[n_bound].real = real;
	bound[n_bound].copy = copy;
	*index = n_bound;
	n_bound++;
	out = copy; // h stays open: the copied table points into it
	goto done;
close:
	dlclose(h);
done:
	pthread_mutex_unlock(&mu);
	return out;
}

void *nitro_hook_real_compile(int index, nitro_pjrt_compile_args *args) {
	return call(index, NITRO_SLOT_CLIENT_COMPILE, args);
}

void *nitro_hook_serialize(int index, void *loaded, char **bytes, size_t *size) {
	*bytes = NULL;
	*size = 0;
	if (bound[index].real->slot[NITRO_SLOT_EXECUTABLE_SERIALIZE] == NULL) return NULL;
	get_executable_args g = {sizeof(g), NULL, loaded, NULL};
	void *err = call(index, NITRO_SLOT_LOADED_EXECUTABLE_GET_EXECUTABLE, &g);
	if (err != NULL) return err;
	serialize_args s = {sizeof(s), NULL, g.executable, NULL, 0, NULL, NULL};
	err = call(index, NITRO_SLOT_EXECUTABLE_SERIALIZE, &s);
	if (err == NULL) {
		*bytes = malloc(s.size > 0 ? s.size : 1);
		if (*bytes != NULL) {
			memcpy(*bytes, s.bytes, s.size);
			*size = s.size;
		}
		if (s.deleter != NULL) s.deleter(s.serialized);
	}
	destroy_args d = {sizeof(d), NULL, g.executable};
	void *derr = call(index, NITRO_SLOT_EXECUTABLE_DESTROY, &d);
	if (err == NULL) return derr;
	if (derr != NULL) nitro_hook_error_destroy(index, derr);
	return err;
}

void *nitro_hook_deserialize(int index, void *client, const char *bytes, size_t size, void **loaded) {
	deserialize_args a = {sizeof(a), NULL, client, bytes, size, NULL, NULL, 0};
	void *err = call(index, NITRO_SLOT_EXECUTABLE_DESERIALIZE_AND_LOAD, &a);
	*loaded = a.loaded;
	return err;
}

void nitro_hook_destroy_loaded(int index, void *loaded) {
	destroy_args d = {sizeof(d), NULL, loaded};
	void *err = call(index, NITRO_SLOT_LOADED_EXECUTABLE_DESTROY, &d);
	if (err != NULL) nitro_hook_error_destroy(index, err);
}

void *nitro_hook_client_facts(int index, void *client, const char **platform, size_t *platform_size,
			      const char **version, size_t *version_size, int *process_index,
			      size_t *devices, const char **kind, size_t *kind_size) {
	client_string_args n = {sizeof(n), NULL, client, NULL, 0};
	void *err = call(index, NITRO_SLOT_CLIENT_PLATFORM_NAME, &n);
	if (err != NULL) return err;
	*platform = n.out;
	*platform_size = n.out_size;
	client_string_args v = {sizeof(v), NULL, client, NULL, 0};
	if ((err = call(index, NITRO_SLOT_CLIENT_PLATFORM_VERSION, &v)) != NULL) return err;
	*version = v.out;
	*version_size = v.out_size;
	client_process_index_args p = {sizeof(p), NULL, client, 0};
	if ((err = call(index, NITRO_SLOT_CLIENT_PROCESS_INDEX, &p)) != NULL) return err;
	*process_index = p.process_index;
	client_devices_args d = {sizeof(d), NULL, client, NULL, 0};
	if ((err = call(index, NITRO_SLOT_CLIENT_ADDRESSABLE_DEVICES, &d)) != NULL) return err;
	*devices = d.num_devices;
	*kind = "";
	*kind_size = 0;
	if (d.num_devices == 0) return NULL;
	device_description_args g = {sizeof(g), NULL, d.devices[0], NULL};
	if ((err = call(index, NITRO_SLOT_DEVICE_GET_DESCRIPTION, &g)) != NULL) return err;
	description_kind_args k = {sizeof(k), NULL, g.description, NULL, 0};
	if ((err = call(index, NITRO_SLOT_DEVICE_DESCRIPTION_KIND, &k)) != NULL) return err;
	*kind = k.kind;
	*kind_size = k.kind_size;
	return NULL;
}

void nitro_hook_error_message(int index, void *error, char *buf, size_t len) {
	error_message_args a = {sizeof(a), NULL, error, NULL, 0};
	((void (*)(void *))bound[index].real->slot[NITRO_SLOT_ERROR_MESSAGE])(&a);
	size_t n = a.message_size < len - 1 ? a.message_size : len - 1;
	if (a.message != NULL && n > 0) memcpy(buf, a.message, n);
	buf[a.message != NULL ? n : 0] = 0;
}

void nitro_hook_error_destroy(int index, void *error) {
	error_destroy_args a = {sizeof(a), NULL, error};
	((void (*)(void *))bound[index].real->slot[NITRO_SLOT_ERROR_DESTROY])(&a);
}

void nitro_hook_api_version(int index, int *major, int *minor) {
	*major = bound[index].real->pjrt_api_version.major_version;
	*minor = bound[index].real->pjrt_api_version.minor_version;
}

size_t nitro_offset_slot(int slot) { return offsetof(nitro_pjrt_api_head, slot) + (size_t)slot * sizeof(void *); }
size_t nitro_offset_program_in_args(void) { return offsetof(nitro_pjrt_compile_args, program); }
size_t nitro_offset_format_in_program(void) { return offsetof(nitro_pjrt_program, format); }
size_t nitro_offset_executable_in_args(void) { return offsetof(nitro_pjrt_compile_args, executable); }

// nitro_arg_layout reports the argument structs' sizes and the offsets the calls rely on, in the
// order the layout test lists them.
size_t nitro_arg_layout(int i) {
	switch (i) {
	case 0: return sizeof(error_message_args);
	case 1: return sizeof(error_destroy_args);
	case 2: return sizeof(client_string_args);
	case 3: return offsetof(client_process_index_args, process_index);
	case 4: return sizeof(client_devices_args);
	case 5: return sizeof(device_description_args);
	case 6: return sizeof(description_kind_args);
	case 7: return sizeof(get_executable_args);
	case 8: return sizeof(destroy_args);
	case 9: return sizeof(serialize_args);
	case 10: return offsetof(serialize_args, deleter);
	case 11: return sizeof(deserialize_args);
	case 12: return offsetof(deserialize_args, loaded);
	}
	return 0;
}
