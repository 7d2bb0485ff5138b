// The capture shim: a copy of a real PJRT plugin's function table with PJRT_Client_Compile
// wrapped. The wrapper forwards to the real Compile and, when armed and the compile succeeded,
// keeps a copy of the program's format and code. Every other entry (and every extension) is the
// real plugin's own, so clients, buffers and executables are the real plugin's objects.
#include "shim.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef const void *(*get_api_fn)(void);

typedef struct {
	char *format;
	size_t format_size;
	char *code;
	size_t code_size;
} record;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static char *bound_path;                 // the real plugin this process's shim forwards to
static nitro_pjrt_api_head *shim_api;    // the copied table, never freed (gopjrt keeps it)
static nitro_pjrt_compile_fn real_compile;
static int armed;
static record *records;
static size_t n_records, cap_records;

static void drop_records(void) {
	for (size_t i = 0; i < n_records; i++) {
		free(records[i].format);
		free(records[i].code);
	}
	free(records);
	records = NULL;
	n_records = cap_records = 0;
}

static void keep(const nitro_pjrt_program *p) {
	record r;
	r.format_size = p->format_size;
	r.code_size = p->code_size;
	r.format = malloc(p->format_size + 1);
	r.code = malloc(p->code_size + 1);
	if (r.format == NULL || r.code == NULL) {
		free(r.format);
		free(r.code);
		return; // out of memory: the Go side sees fewer programs than compiles
	}
	if (p->format_size > 0) memcpy(r.format, p->format, p->format_size);
	if (p->code_size > 0) memcpy(r.code, p->code, p->code_size);
	r.format[p->format_size] = 0;
	r.code[p->code_size] = 0;
	if (n_records == cap_records) {
		size_t c = cap_records ? 2 * cap_records : 8;
		record *grown = realloc(records, c * sizeof(record));
		if (grown == NULL) {
			free(r.format);
			free(r.code);
			return;
		}
		records = grown;
		cap_records = c;
	}
	records[n_records++] = r;
}

static void *compile_and_record(nitro_pjrt_compile_args *args) {
	void *err = real_compile(args);
	if (err != NULL || args == NULL || args->program == NULL) return err;
	pthread_mutex_lock(&mu);
	if (armed) keep(args->program);
	pthread_mutex_unlock(&mu);
	return err;
}

const void *nitro_capture_api(const char *real_path, char *err, size_t err_len) {
	const void *out = NULL;
	pthread_mutex_lock(&mu);
	if (shim_api != NULL) {
		if (strcmp(bound_path, real_path) == 0) {
			out = shim_api;
		} else {
			snprintf(err, err_len, "the capture shim already forwards to %s in this process", bound_path);
		}
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
		snprintf(err, err_len, "%s: PJRT C API major version %d, the shim knows the layout of 0 only",
			 real_path, real->pjrt_api_version.major_version);
		goto close;
	}
	if (real->struct_size < sizeof(nitro_pjrt_api_head) || real->client_compile == NULL) {
		snprintf(err, err_len, "%s: PJRT_Api of %zu bytes has no PJRT_Client_Compile", real_path,
			 real->struct_size);
		goto close;
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
	real_compile = real->client_compile;
	copy->client_compile = compile_and_record;
	shim_api = copy;
	bound_path = path;
	out = shim_api; // h stays open: the copied table points into it
	goto done;
close:
	dlclose(h);
done:
	pthread_mutex_unlock(&mu);
	return out;
}

void nitro_capture_arm(int on) {
	pthread_mutex_lock(&mu);
	armed = on;
	if (!on) drop_records();
	pthread_mutex_unlock(&mu);
}

size_t nitro_capture_count(void) {
	pthread_mutex_lock(&mu);
	size_t n = n_records;
	pthread_mutex_unlock(&mu);
	return n;
}

int nitro_capture_get(size_t i, const char **format, size_t *format_size, const char **code,
		      size_t *code_size) {
	int ok = 0;
	pthread_mutex_lock(&mu);
	if (i < n_records) {
		*format = records[i].format;
		*format_size = records[i].format_size;
		*code = records[i].code;
		*code_size = records[i].code_size;
		ok = 1;
	}
	pthread_mutex_unlock(&mu);
	return ok;
}

size_t nitro_offset_client_compile(void) { return offsetof(nitro_pjrt_api_head, client_compile); }
size_t nitro_offset_program_in_args(void) { return offsetof(nitro_pjrt_compile_args, program); }
size_t nitro_offset_format_in_program(void) { return offsetof(nitro_pjrt_program, format); }
