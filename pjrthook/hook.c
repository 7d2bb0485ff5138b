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

// A binding, once made, is the plugin's for the process's life: gopjrt keeps the copy and calls
// through it without our lock, and its hooks name the index, so a slot handed to another plugin
// would route the first one's later calls there. The Go side (Register) binds each plugin file
// once, by its resolved path, and every later client of the file reuses the binding.
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
	int value;
} description_int_args; // DeviceDescription_Id and _ProcessIndex share this shape
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
} destroy_args; // Executable_Destroy, LoadedExecutable_Destroy and _Delete, Client_Destroy
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

// The release hooks: an executable (or its client) may still be read by a background
// serialization. The Go side either finishes that first, then the real plugin frees it, or
// keeps it: the executable is shared and another holder still has it, or (Destroy only) its
// write has not run yet and will destroy it when done. The three argument structs share
// destroy_args's shape (the object's pointer after the header).
static void *release(int index, int slot, destroy_args *args) {
	if (nitroHookRelease(index, args->executable, slot == NITRO_SLOT_CLIENT_DESTROY,
			     slot == NITRO_SLOT_LOADED_EXECUTABLE_DESTROY))
		return NULL;
	return call(index, slot, args);
}

#define HOOK_RELEASE(i)                                                                                        \
	static void *hook_destroy_loaded_##i(destroy_args *a) { return release(i, NITRO_SLOT_LOADED_EXECUTABLE_DESTROY, a); } \
	static void *hook_delete_loaded_##i(destroy_args *a) { return release(i, NITRO_SLOT_LOADED_EXECUTABLE_DELETE, a); }  \
	static void *hook_destroy_client_##i(destroy_args *a) { return release(i, NITRO_SLOT_CLIENT_DESTROY, a); }
HOOK_RELEASE(0)
HOOK_RELEASE(1)
HOOK_RELEASE(2)
HOOK_RELEASE(3)
static void *const release_fns[NITRO_HOOK_MAX_PLUGINS][3] = {
	{(void *)hook_destroy_loaded_0, (void *)hook_delete_loaded_0, (void *)hook_destroy_client_0},
	{(void *)hook_destroy_loaded_1, (void *)hook_delete_loaded_1, (void *)hook_destroy_client_1},
	{(void *)hook_destroy_loaded_2, (void *)hook_delete_loaded_2, (void *)hook_destroy_client_2},
	{(void *)hook_destroy_loaded_3, (void *)hook_delete_loaded_3, (void *)hook_destroy_client_3}};
static const int release_slots[3] = {NITRO_SLOT_LOADED_EXECUTABLE_DESTROY, NITRO_SLOT_LOADED_EXECUTABLE_DELETE,
				     NITRO_SLOT_CLIENT_DESTROY};

// The client-create piece. dist_nodes <= 1: a single process, creates pass through untouched.
static int dist_node, dist_nodes;

void nitro_hook_set_distributed(int node_id, int num_nodes) {
	pthread_mutex_lock(&mu);
	dist_node = node_id;
	dist_nodes = num_nodes;
	pthread_mutex_unlock(&mu);
}

// Values handed to the plugin are malloc'd by cgo (C.CBytes); the plugin copies and frees them
// through this deleter, as the callback's contract asks.
static void free_value(char *v) { free(v); }

static void *kv_error(nitro_callback_error *make, int code, const char *msg) {
	// A plugin that hands no error constructor cannot be told of a failure; abort rather than
	// let it read a missing value as a success.
	if (make == NULL || *make == NULL) abort();
	return (*make)(code, msg, strlen(msg));
}

// kv_fetch serves both gets: the value goes to the plugin with free_value as its deleter.
static void *kv_fetch(const char *key, size_t key_size, int timeout_ms, int try, nitro_callback_error *make,
		      char **value, size_t *size, void (**deleter)(char *)) {
	char msg[512] = {0};
	char *v = NULL;
	size_t n = 0;
	int code = nitroKVGet((char *)key, key_size, timeout_ms, try, &v, &n, msg, sizeof msg);
	if (code != 0) return kv_error(make, code, msg);
	*value = v;
	*size = n;
	*deleter = free_value;
	return NULL;
}

static void *kv_get(nitro_kv_get_args *a) {
	return kv_fetch(a->key, a->key_size, a->timeout_in_ms, 0, a->callback_error, &a->value, &a->value_size,
			&a->value_deleter_callback);
}

static void *kv_try_get(nitro_kv_try_get_args *a) {
	return kv_fetch(a->key, a->key_size, 0, 1, a->callback_error, &a->value, &a->value_size,
			&a->value_deleter_callback);
}

static void *kv_put(nitro_kv_put_args *a) {
	char msg[512] = {0};
	int code = nitroKVPut((char *)a->key, a->key_size, (char *)a->value, a->value_size, msg, sizeof msg);
	if (code != 0) return kv_error(a->callback_error, code, msg);
	return NULL;
}

static int named(const nitro_pjrt_named_value *v, const char *name) {
	return v->name_size == strlen(name) && memcmp(v->name, name, v->name_size) == 0;
}

static void *hook_create(int index, nitro_pjrt_client_create_args *args) {
	pthread_mutex_lock(&mu);
	int node = dist_node, nodes = dist_nodes;
	pthread_mutex_unlock(&mu);
	if (nodes <= 1) return call(index, NITRO_SLOT_CLIENT_CREATE, args);
	// A caller built against an older header may hand a shorter struct: work on a full copy.
	nitro_pjrt_client_create_args a = {0};
	memcpy(&a, args, args->struct_size < sizeof(a) ? args->struct_size : sizeof(a));
	a.struct_size = sizeof(a);
	nitro_pjrt_named_value *opts = calloc(a.num_options + 2, sizeof(*opts));
	if (opts == NULL) {
		// No PJRT_Error can be made here (the plugin's constructor is not ours), and a client
		// started as one process while the launcher says several would train apart: stop.
		fprintf(stderr, "nitro pjrthook: out of memory adding the distributed options to PJRT_Client_Create\n");
		abort();
	}
	size_t k = 0;
	for (size_t i = 0; i < a.num_options; i++) {
		// Ours win: the process's place in the run is the launcher's, not the caller's guess.
		if (named(&a.create_options[i], "node_id") || named(&a.create_options[i], "num_nodes")) continue;
		opts[k++] = a.create_options[i];
	}
	const char *names[2] = {"node_id", "num_nodes"};
	int64_t values[2] = {node, nodes};
	for (int j = 0; j < 2; j++, k++) {
		opts[k].struct_size = sizeof(opts[k]);
		opts[k].name = names[j];
		opts[k].name_size = strlen(names[j]);
		opts[k].type = NITRO_NAMED_INT64;
		opts[k].int64_value = values[j];
		opts[k].value_size = 1;
	}
	a.create_options = opts;
	a.num_options = k;
	// All three or none: a plugin given only some ignores the store.
	a.kv_get_callback = kv_get;
	a.kv_try_get_callback = kv_try_get;
	a.kv_put_callback = kv_put;
	a.kv_get_user_arg = a.kv_try_get_user_arg = a.kv_put_user_arg = NULL;
	void *err = call(index, NITRO_SLOT_CLIENT_CREATE, &a);
	free(opts); // the plugin reads options only during the call
	args->client = a.client;
	return err;
}

#define HOOK_CREATE(i) \
	static void *hook_create_##i(nitro_pjrt_client_create_args *args) { return hook_create(i, args); }
HOOK_CREATE(0)
HOOK_CREATE(1)
HOOK_CREATE(2)
HOOK_CREATE(3)
static void *const create_fns[NITRO_HOOK_MAX_PLUGINS] = {
	(void *)hook_create_0, (void *)hook_create_1, (void *)hook_create_2, (void *)hook_create_3};

void *nitro_hook_create_through(int index, const char *name, int64_t value, void **client) {
	nitro_pjrt_named_value opt = {sizeof(opt), NULL, name, strlen(name), NITRO_NAMED_INT64, {0}, 1};
	opt.int64_value = value;
	nitro_pjrt_client_create_args a = {sizeof(a), NULL, &opt, 1, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
	void *err = ((pjrt_fn)bound[index].copy->slot[NITRO_SLOT_CLIENT_CREATE])(&a);
	*client = a.client;
	return err;
}

void *nitro_hook_compile_through(int index, void *client, const char *code, size_t code_size, const char *options,
				 size_t options_size, void **loaded) {
	nitro_pjrt_program p = {sizeof(p), NULL, (char *)code, code_size, "mlir", 4};
	nitro_pjrt_compile_args a = {sizeof(a), NULL, client, &p, options, options_size, NULL};
	void *err = ((pjrt_fn)bound[index].copy->slot[NITRO_SLOT_CLIENT_COMPILE])(&a);
	*loaded = a.executable;
	return err;
}

void *nitro_hook_release_through(int index, int slot, void *obj) {
	destroy_args d = {sizeof(d), NULL, obj};
	return ((pjrt_fn)bound[index].copy->slot[slot])(&d);
}

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
	if (real->slot[NITRO_SLOT_CLIENT_CREATE] != NULL) copy->slot[NITRO_SLOT_CLIENT_CREATE] = create_fns[n_bound];
	for (int r = 0; r < 3; r++) {
		if (real->slot[release_slots[r]] != NULL) copy->slot[release_slots[r]] = release_fns[n_bound][r];
	}
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
	*loaded = NULL;
	// A plugin without the slot loads nothing (the caller compiles), as one without Serialize
	// writes nothing: never a call through a null pointer.
	if (bound[index].real->slot[NITRO_SLOT_EXECUTABLE_DESERIALIZE_AND_LOAD] == NULL) return NULL;
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

static void *description_int(int index, int slot, void *device, int *out) {
	device_description_args g = {sizeof(g), NULL, device, NULL};
	void *err = call(index, NITRO_SLOT_DEVICE_GET_DESCRIPTION, &g);
	if (err != NULL) return err;
	description_int_args d = {sizeof(d), NULL, g.description, 0};
	if ((err = call(index, slot, &d)) != NULL) return err;
	*out = d.value;
	return NULL;
}

void *nitro_hook_client_devices(int index, void *client, int64_t *ids, int *procs, size_t cap, size_t *n,
				int *process_index, int64_t *first_addressable) {
	*n = 0;
	*first_addressable = -1;
	const nitro_pjrt_api_head *real = bound[index].real;
	if (real->slot[NITRO_SLOT_CLIENT_DEVICES] == NULL || real->slot[NITRO_SLOT_DEVICE_DESCRIPTION_ID] == NULL ||
	    real->slot[NITRO_SLOT_DEVICE_DESCRIPTION_PROCESS_INDEX] == NULL ||
	    real->slot[NITRO_SLOT_DEVICE_GET_DESCRIPTION] == NULL)
		return NULL; // no device list: n stays 0 and the caller says so
	client_process_index_args p = {sizeof(p), NULL, client, 0};
	void *err = call(index, NITRO_SLOT_CLIENT_PROCESS_INDEX, &p);
	if (err != NULL) return err;
	*process_index = p.process_index;
	client_devices_args d = {sizeof(d), NULL, client, NULL, 0};
	if ((err = call(index, NITRO_SLOT_CLIENT_DEVICES, &d)) != NULL) return err;
	*n = d.num_devices;
	for (size_t i = 0; i < d.num_devices && i < cap; i++) {
		int id = 0, proc = 0;
		if ((err = description_int(index, NITRO_SLOT_DEVICE_DESCRIPTION_ID, d.devices[i], &id)) != NULL) return err;
		if ((err = description_int(index, NITRO_SLOT_DEVICE_DESCRIPTION_PROCESS_INDEX, d.devices[i], &proc)) != NULL)
			return err;
		ids[i] = id;
		procs[i] = proc;
	}
	client_devices_args a = {sizeof(a), NULL, client, NULL, 0};
	if ((err = call(index, NITRO_SLOT_CLIENT_ADDRESSABLE_DEVICES, &a)) != NULL) return err;
	if (a.num_devices > 0) {
		int id = 0;
		if ((err = description_int(index, NITRO_SLOT_DEVICE_DESCRIPTION_ID, a.devices[0], &id)) != NULL) return err;
		*first_addressable = id;
	}
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
	case 13: return sizeof(nitro_pjrt_named_value);
	case 14: return offsetof(nitro_pjrt_named_value, type);
	case 15: return offsetof(nitro_pjrt_named_value, int64_value);
	case 16: return offsetof(nitro_pjrt_named_value, value_size);
	case 17: return sizeof(nitro_pjrt_client_create_args);
	case 18: return offsetof(nitro_pjrt_client_create_args, kv_get_callback);
	case 19: return offsetof(nitro_pjrt_client_create_args, kv_put_callback);
	case 20: return offsetof(nitro_pjrt_client_create_args, client);
	case 21: return offsetof(nitro_pjrt_client_create_args, kv_try_get_callback);
	case 22: return sizeof(nitro_kv_get_args);
	case 23: return offsetof(nitro_kv_get_args, timeout_in_ms);
	case 24: return offsetof(nitro_kv_get_args, callback_error);
	case 25: return offsetof(nitro_kv_get_args, value);
	case 26: return offsetof(nitro_kv_get_args, value_deleter_callback);
	case 27: return sizeof(nitro_kv_try_get_args);
	case 28: return offsetof(nitro_kv_try_get_args, callback_error);
	case 29: return offsetof(nitro_kv_try_get_args, value);
	case 30: return offsetof(nitro_kv_try_get_args, value_deleter_callback);
	case 31: return sizeof(nitro_kv_put_args);
	case 32: return offsetof(nitro_kv_put_args, value);
	case 33: return offsetof(nitro_kv_put_args, callback_error);
	case 34: return offsetof(nitro_kv_put_args, user_arg);
	case 35: return offsetof(destroy_args, executable);
	case 36: return sizeof(description_int_args);
	case 37: return offsetof(description_int_args, value);
	}
	return 0;
}
