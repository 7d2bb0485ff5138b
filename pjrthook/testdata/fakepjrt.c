// A fake PJRT plugin for the interposer's tests, built against the real pjrt_c_api.h. Its
// PJRT_Client_Create writes what it was given to $FAKE_PJRT_REPORT (one fact a line) and, when it
// got node_id, num_nodes and all three key-value callbacks, swaps a value with every other node
// through them, as XLA's GPU plugin swaps its topology.
//
// Its devices: two per node, with global ids 10 + node and 20 + node (the lowest id is not the
// node's number times two), the node's own addressable. Its compile writes the serialized options
// it was given to $FAKE_PJRT_OPTIONS.<n> for the n-th compile (from 1), and makes an executable that its destroy marks dead (never frees); its serialize waits
// until the file $FAKE_PJRT_GATE exists, then appends "serialized" (or "serialized a destroyed
// executable") to $FAKE_PJRT_EVENTS, as its destroys append theirs: the order of the lines is the
// lifetime the interposer keeps.
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pjrt_c_api.h"

struct PJRT_Error {
	PJRT_Error_Code code;
	char message[512];
};

static PJRT_Error *new_error(PJRT_Error_Code code, const char *msg, size_t n) {
	PJRT_Error *e = calloc(1, sizeof(*e));
	e->code = code;
	if (n > sizeof(e->message) - 1) n = sizeof(e->message) - 1;
	memcpy(e->message, msg, n);
	return e;
}

static PJRT_CallbackError make_error = new_error;

static void error_destroy(PJRT_Error_Destroy_Args *a) { free(a->error); }
static void error_message(PJRT_Error_Message_Args *a) {
	a->message = a->error->message;
	a->message_size = strlen(a->error->message);
}
static PJRT_Error *error_get_code(PJRT_Error_GetCode_Args *a) {
	a->code = a->error->code;
	return NULL;
}
struct PJRT_LoadedExecutable {
	int alive;
};
struct PJRT_Executable {
	PJRT_LoadedExecutable *of;
};

static pthread_mutex_t events_mu = PTHREAD_MUTEX_INITIALIZER;

static void event(const char *what) {
	const char *path = getenv("FAKE_PJRT_EVENTS");
	if (path == NULL) return;
	pthread_mutex_lock(&events_mu);
	FILE *f = fopen(path, "a");
	if (f != NULL) {
		fprintf(f, "%s\n", what);
		fclose(f);
	}
	pthread_mutex_unlock(&events_mu);
}

static int compiles;

// The node this process's client was created as, and how many: 0 of 1 until a create says else.
static long long the_node = 0, the_nodes = 1;

// The key-value callbacks a distributed create got, kept: a compile swaps a value through them
// again, as the GPU plugin swaps its communicators' ids when a program first runs a collective.
static PJRT_KeyValueGetCallback kept_get;
static PJRT_KeyValuePutCallback kept_put;
static void *kept_get_arg, *kept_put_arg;

static void swap_at_compile(int n) {
	const char *path = getenv("FAKE_PJRT_REPORT");
	if (kept_get == NULL || kept_put == NULL || the_nodes < 2 || path == NULL) return;
	FILE *f = fopen(path, "a");
	if (f == NULL) return;
	char key[64], value[64];
	snprintf(key, sizeof key, "fake/compile/%d/%lld", n, the_node);
	snprintf(value, sizeof value, "compile %d of node %lld", n, the_node);
	PJRT_KeyValuePutCallback_Args p = {PJRT_KeyValuePutCallback_Args_STRUCT_SIZE, NULL, key, strlen(key),
					   value, strlen(value), &make_error, kept_put_arg};
	PJRT_Error *e = kept_put(&p);
	if (e != NULL) {
		fprintf(f, "compile %d put error %s\n", n, e->message);
		free(e);
	}
	long long other = (the_node + 1) % the_nodes;
	snprintf(key, sizeof key, "fake/compile/%d/%lld", n, other);
	PJRT_KeyValueGetCallback_Args g = {PJRT_KeyValueGetCallback_Args_STRUCT_SIZE, NULL, key, strlen(key),
					   30000, &make_error, kept_get_arg, NULL, 0, NULL};
	e = kept_get(&g);
	if (e != NULL) {
		fprintf(f, "compile %d get error %s\n", n, e->message);
		free(e);
	} else {
		fprintf(f, "compile %d got %.*s\n", n, (int)g.value_size, g.value);
		if (g.value_deleter_callback) g.value_deleter_callback(g.value);
	}
	fclose(f);
}

static PJRT_Error *compile(PJRT_Client_Compile_Args *a) {
	const char *opts = getenv("FAKE_PJRT_OPTIONS");
	if (opts != NULL) {
		char path[4096];
		snprintf(path, sizeof path, "%s.%d", opts, ++compiles);
		FILE *f = fopen(path, "w");
		if (f == NULL) return new_error(PJRT_Error_Code_INTERNAL, "cannot write the options", 24);
		fwrite(a->compile_options, 1, a->compile_options_size, f);
		fclose(f);
	}
	swap_at_compile(opts != NULL ? compiles : ++compiles);
	a->executable = calloc(1, sizeof(PJRT_LoadedExecutable));
	a->executable->alive = 1;
	event("compiled");
	return NULL;
}
static PJRT_Error *loaded_destroy(PJRT_LoadedExecutable_Destroy_Args *a) {
	a->executable->alive = 0;
	event("destroyed");
	return NULL;
}
static PJRT_Error *get_executable(PJRT_LoadedExecutable_GetExecutable_Args *a) {
	a->executable = calloc(1, sizeof(PJRT_Executable));
	a->executable->of = a->loaded_executable;
	return NULL;
}
static PJRT_Error *executable_destroy(PJRT_Executable_Destroy_Args *a) {
	free(a->executable);
	return NULL;
}
static PJRT_Error *serialize(PJRT_Executable_Serialize_Args *a) {
	const char *gate = getenv("FAKE_PJRT_GATE");
	for (int i = 0; gate != NULL && access(gate, F_OK) != 0 && i < 6000; i++) usleep(10000);
	event(a->executable->of->alive ? "serialized" : "serialized a destroyed executable");
	a->serialized_bytes = "fake executable";
	a->serialized_bytes_size = 15;
	a->serialized_executable = NULL;
	a->serialized_executable_deleter = NULL;
	return NULL;
}
static PJRT_Error *platform_name(PJRT_Client_PlatformName_Args *a) {
	a->platform_name = "fake";
	a->platform_name_size = 4;
	return NULL;
}
static PJRT_Error *platform_version(PJRT_Client_PlatformVersion_Args *a) {
	a->platform_version = "1";
	a->platform_version_size = 1;
	return NULL;
}

struct PJRT_Device {
	int id, process;
};
struct PJRT_DeviceDescription {
	int id, process;
};
#define FAKE_MAX_NODES 8
static PJRT_Device devices[2 * FAKE_MAX_NODES];
static PJRT_Device *all_devices[2 * FAKE_MAX_NODES];
static PJRT_Device *own_devices[2];

static void place_devices(void) {
	int n = 0;
	for (int k = 0; k < 2; k++) {
		for (int p = 0; p < the_nodes; p++, n++) {
			devices[n].id = 10 * (k + 1) + p;
			devices[n].process = p;
			all_devices[n] = &devices[n];
			if (p == the_node) own_devices[k] = &devices[n];
		}
	}
}

static PJRT_Error *process_index(PJRT_Client_ProcessIndex_Args *a) {
	a->process_index = (int)the_node;
	return NULL;
}
static PJRT_Error *client_devices(PJRT_Client_Devices_Args *a) {
	a->devices = all_devices;
	a->num_devices = 2 * the_nodes;
	return NULL;
}
static PJRT_Error *addressable_devices(PJRT_Client_AddressableDevices_Args *a) {
	a->addressable_devices = own_devices;
	a->num_addressable_devices = 2;
	return NULL;
}
static PJRT_Error *get_description(PJRT_Device_GetDescription_Args *a) {
	a->device_description = (PJRT_DeviceDescription *)a->device; // same layout
	return NULL;
}
static PJRT_Error *description_id(PJRT_DeviceDescription_Id_Args *a) {
	a->id = a->device_description->id;
	return NULL;
}
static PJRT_Error *description_process(PJRT_DeviceDescription_ProcessIndex_Args *a) {
	a->process_index = a->device_description->process;
	return NULL;
}
static PJRT_Error *description_kind(PJRT_DeviceDescription_Kind_Args *a) {
	a->device_kind = "fake";
	a->device_kind_size = 4;
	return NULL;
}
static PJRT_Error *client_destroy(PJRT_Client_Destroy_Args *a) {
	(void)a;
	event("client destroyed");
	return NULL;
}

static PJRT_Error *plugin_initialize(PJRT_Plugin_Initialize_Args *a) {
	(void)a;
	return NULL;
}
static PJRT_Error *plugin_attributes(PJRT_Plugin_Attributes_Args *a) {
	a->attributes = NULL;
	a->num_attributes = 0;
	return NULL;
}

static int client_object;

static PJRT_Error *client_create(PJRT_Client_Create_Args *a) {
	const char *path = getenv("FAKE_PJRT_REPORT");
	FILE *f = fopen(path ? path : "/dev/null", "w");
	if (f == NULL) return new_error(PJRT_Error_Code_INTERNAL, "cannot write the report", 23);
	long long node = -1, nodes = -1;
	for (size_t i = 0; i < a->num_options; i++) {
		const PJRT_NamedValue *o = &a->create_options[i];
		if (o->type != PJRT_NamedValue_kInt64) {
			fprintf(f, "option %.*s type %d\n", (int)o->name_size, o->name, (int)o->type);
			continue;
		}
		fprintf(f, "option %.*s %lld\n", (int)o->name_size, o->name, (long long)o->int64_value);
		if (o->name_size == 7 && memcmp(o->name, "node_id", 7) == 0) node = o->int64_value;
		if (o->name_size == 9 && memcmp(o->name, "num_nodes", 9) == 0) nodes = o->int64_value;
	}
	fprintf(f, "callbacks get=%d try_get=%d put=%d\n", a->kv_get_callback != NULL,
		a->kv_try_get_callback != NULL, a->kv_put_callback != NULL);
	if (node >= 0 && nodes > 1 && a->kv_get_callback && a->kv_try_get_callback && a->kv_put_callback) {
		char key[64], value[64];
		snprintf(key, sizeof key, "fake/%lld", node);
		snprintf(value, sizeof value, "from node %lld", node);
		PJRT_KeyValuePutCallback_Args p = {PJRT_KeyValuePutCallback_Args_STRUCT_SIZE, NULL, key, strlen(key),
						   value, strlen(value), &make_error, a->kv_put_user_arg};
		PJRT_Error *e = a->kv_put_callback(&p);
		fprintf(f, "put %s %s\n", key, e ? e->message : "ok");
		for (long long other = 0; other < nodes; other++) {
			if (other == node) continue;
			snprintf(key, sizeof key, "fake/%lld", other);
			PJRT_KeyValueGetCallback_Args g = {PJRT_KeyValueGetCallback_Args_STRUCT_SIZE, NULL, key, strlen(key),
							   30000, &make_error, a->kv_get_user_arg, NULL, 0, NULL};
			e = a->kv_get_callback(&g);
			if (e != NULL) {
				fprintf(f, "get %s error %d %s\n", key, (int)e->code, e->message);
				free(e);
				continue;
			}
			fprintf(f, "get %s %.*s deleter=%d\n", key, (int)g.value_size, g.value, g.value_deleter_callback != NULL);
			if (g.value_deleter_callback) g.value_deleter_callback(g.value);
		}
		PJRT_KeyValueTryGetCallback_Args t = {PJRT_KeyValueTryGetCallback_Args_STRUCT_SIZE, NULL, "fake/absent", 11,
						      &make_error, a->kv_try_get_user_arg, NULL, 0, NULL};
		e = a->kv_try_get_callback(&t);
		fprintf(f, "try_get fake/absent code %d\n", e ? (int)e->code : 0);
		free(e);
		snprintf(key, sizeof key, "fake/%lld", node);
		PJRT_KeyValueTryGetCallback_Args own = {PJRT_KeyValueTryGetCallback_Args_STRUCT_SIZE, NULL, key, strlen(key),
							&make_error, a->kv_try_get_user_arg, NULL, 0, NULL};
		e = a->kv_try_get_callback(&own);
		if (e == NULL) {
			fprintf(f, "try_get %s %.*s\n", key, (int)own.value_size, own.value);
			if (own.value_deleter_callback) own.value_deleter_callback(own.value);
		}
		free(e);
	}
	fclose(f);
	if (node >= 0 && nodes > 1 && nodes <= FAKE_MAX_NODES && node < nodes) {
		the_node = node;
		the_nodes = nodes;
		kept_get = a->kv_get_callback;
		kept_put = a->kv_put_callback;
		kept_get_arg = a->kv_get_user_arg;
		kept_put_arg = a->kv_put_user_arg;
	}
	place_devices();
	a->client = (PJRT_Client *)&client_object;
	return NULL;
}

static PJRT_Api api;

const PJRT_Api *GetPjrtApi(void) {
	api.struct_size = PJRT_Api_STRUCT_SIZE;
	api.pjrt_api_version.struct_size = PJRT_Api_Version_STRUCT_SIZE;
	api.pjrt_api_version.major_version = PJRT_API_MAJOR;
	api.pjrt_api_version.minor_version = PJRT_API_MINOR;
	api.PJRT_Error_Destroy = error_destroy;
	api.PJRT_Error_Message = error_message;
	api.PJRT_Error_GetCode = error_get_code;
	api.PJRT_Plugin_Initialize = plugin_initialize;
	api.PJRT_Plugin_Attributes = plugin_attributes;
	api.PJRT_Client_Create = client_create;
	api.PJRT_Client_Compile = compile;
	api.PJRT_Client_Destroy = client_destroy;
	api.PJRT_Client_PlatformName = platform_name;
	api.PJRT_Client_PlatformVersion = platform_version;
	api.PJRT_Client_ProcessIndex = process_index;
	api.PJRT_Client_AddressableDevices = addressable_devices;
	api.PJRT_Client_Devices = client_devices;
	api.PJRT_Device_GetDescription = get_description;
	api.PJRT_DeviceDescription_Id = description_id;
	api.PJRT_DeviceDescription_ProcessIndex = description_process;
	api.PJRT_DeviceDescription_Kind = description_kind;
	api.PJRT_LoadedExecutable_Destroy = loaded_destroy;
	api.PJRT_LoadedExecutable_GetExecutable = get_executable;
	api.PJRT_Executable_Destroy = executable_destroy;
	api.PJRT_Executable_Serialize = serialize;
	return &api;
}
