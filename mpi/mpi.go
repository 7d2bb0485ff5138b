package mpi

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

// Open MPI's handles are pointers to its predefined objects; this file names them void*, so no
// MPI header is needed to build.
#define OMPI_IN_PLACE ((void *)1)
#define OMPI_THREAD_SERIALIZED 2

static void *lib;
static void *comm_world, *dt_float, *dt_double, *dt_byte, *op_sum, *errors_return;
static int (*p_get_library_version)(char *, int *);
static int (*p_initialized)(int *);
static int (*p_init_thread)(int *, char ***, int, int *);
static int (*p_comm_rank)(void *, int *);
static int (*p_comm_size)(void *, int *);
static int (*p_comm_set_errhandler)(void *, void *);
static int (*p_allreduce)(const void *, void *, int, void *, void *, void *);
static int (*p_bcast)(void *, int, void *, int, void *);
static int (*p_error_string)(int, char *, int *);
static int (*p_finalize)(void);
static int (*p_abort)(void *, int);

// nitro_mpi_load opens path and resolves every symbol; it returns the first missing name, or
// NULL. dlerror's text is copied into err.
static const char *nitro_mpi_load(const char *path, char *err, size_t n) {
	// RTLD_GLOBAL: Open MPI's own components (dlopened by libmpi) resolve symbols in it.
	lib = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
	if (!lib) {
		const char *e = dlerror();
		strncpy(err, e ? e : "dlopen failed", n - 1);
		return "dlopen";
	}
#define SYM(var, name) if (!(*(void **)(&var) = dlsym(lib, name))) return name;
	SYM(p_get_library_version, "MPI_Get_library_version")
	SYM(comm_world, "ompi_mpi_comm_world")
	SYM(dt_float, "ompi_mpi_float")
	SYM(dt_double, "ompi_mpi_double")
	SYM(dt_byte, "ompi_mpi_byte")
	SYM(op_sum, "ompi_mpi_op_sum")
	SYM(errors_return, "ompi_mpi_errors_return")
	SYM(p_initialized, "MPI_Initialized")
	SYM(p_init_thread, "MPI_Init_thread")
	SYM(p_comm_rank, "MPI_Comm_rank")
	SYM(p_comm_size, "MPI_Comm_size")
	SYM(p_comm_set_errhandler, "MPI_Comm_set_errhandler")
	SYM(p_allreduce, "MPI_Allreduce")
	SYM(p_bcast, "MPI_Bcast")
	SYM(p_error_string, "MPI_Error_string")
	SYM(p_finalize, "MPI_Finalize")
	SYM(p_abort, "MPI_Abort")
#undef SYM
	return NULL;
}

// nitro_mpi_version is MPI_Get_library_version, callable before MPI_Init; it needs only that
// symbol, so it also names an implementation whose other symbols are missing.
static int nitro_mpi_version(const char *path, char *out, int n) {
	void *h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
	if (!h) return -1;
	int (*f)(char *, int *) = (int (*)(char *, int *))dlsym(h, "MPI_Get_library_version");
	if (!f) return -2;
	char buf[8192];
	int len = 0;
	f(buf, &len);
	if (len >= n) len = n - 1;
	memcpy(out, buf, len);
	out[len] = 0;
	return 0;
}

static int nitro_mpi_init(int *rank, int *size) {
	int done = 0, provided = 0, rc;
	if ((rc = p_initialized(&done))) return rc;
	if (!done && (rc = p_init_thread(NULL, NULL, OMPI_THREAD_SERIALIZED, &provided))) return rc;
	if (!done && provided < OMPI_THREAD_SERIALIZED) return -1;
	if ((rc = p_comm_set_errhandler(comm_world, errors_return))) return rc;
	if ((rc = p_comm_rank(comm_world, rank))) return rc;
	return p_comm_size(comm_world, size);
}

static int nitro_mpi_allreduce_f32(float *buf, int n) { return p_allreduce(OMPI_IN_PLACE, buf, n, dt_float, op_sum, comm_world); }
static int nitro_mpi_allreduce_f64(double *buf, int n) { return p_allreduce(OMPI_IN_PLACE, buf, n, dt_double, op_sum, comm_world); }
static int nitro_mpi_bcast(void *buf, int n, int root) { return p_bcast(buf, n, dt_byte, root, comm_world); }
static int nitro_mpi_finalize(void) { return p_finalize(); }
static int nitro_mpi_abort(int code) { return p_abort(comm_world, code); }

static void nitro_mpi_error_string(int code, char *out, int n) {
	char buf[512]; // MPI_MAX_ERROR_STRING is 256 in Open MPI
	int len = 0;
	if (p_error_string(code, buf, &len) != 0) len = 0;
	if (len >= n) len = n - 1;
	memcpy(out, buf, len);
	out[len] = 0;
}
*/
import "C"

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"unsafe"
)

// EnvLibrary names the libmpi Open loads when its path argument is empty; unset, it is
// DefaultLibrary, found by the dynamic loader's search.
const EnvLibrary = "NITRO_MPI_LIBRARY"

// DefaultLibrary is Open MPI 4's and 5's libmpi soname.
const DefaultLibrary = "libmpi.so.40"

// Comm is MPI_COMM_WORLD of this process.
type Comm struct {
	rank, size int
	version    string
	library    string
}

var (
	once    sync.Once
	theComm *Comm
	openErr error
)

// Open loads libmpi from path (EnvLibrary, else DefaultLibrary, when empty), checks that it is
// Open MPI, initializes MPI (MPI_Init_thread, MPI_THREAD_SERIALIZED) and returns
// MPI_COMM_WORLD. A process initializes MPI once: later calls return the same Comm (or error).
func Open(path string) (*Comm, error) {
	once.Do(func() { theComm, openErr = open(path) })
	return theComm, openErr
}

func open(path string) (*Comm, error) {
	if path == "" {
		path = os.Getenv(EnvLibrary)
	}
	if path == "" {
		path = DefaultLibrary
	}
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	version, err := libraryVersion(cpath)
	if err != nil {
		return nil, err
	}
	if !strings.Contains(version, "Open MPI") {
		return nil, fmt.Errorf("mpi: %s is %q, not Open MPI: nitro's mpi binds Open MPI's ABI (handles are its exported ompi_mpi_* objects), and an MPICH-family library has other handles; load Open MPI's libmpi (set $%s)", path, firstLine(version), EnvLibrary)
	}
	var msg [512]C.char
	if missing := C.nitro_mpi_load(cpath, &msg[0], C.size_t(len(msg))); missing != nil {
		return nil, fmt.Errorf("mpi: %s (%s) lacks %s: nitro's mpi needs Open MPI 4 or later", path, firstLine(version), C.GoString(missing))
	}
	var rank, size C.int
	if rc := C.nitro_mpi_init(&rank, &size); rc != 0 {
		if rc == -1 {
			return nil, fmt.Errorf("mpi: %s gives no MPI_THREAD_SERIALIZED: nitro calls MPI from whichever thread runs the step; build Open MPI with thread support", path)
		}
		return nil, fmt.Errorf("mpi: initializing %s: %s", path, errorString(rc))
	}
	return &Comm{rank: int(rank), size: int(size), version: firstLine(version), library: path}, nil
}

// libraryVersion is MPI_Get_library_version's text, or why the library does not load.
func libraryVersion(cpath *C.char) (string, error) {
	var buf [8192]C.char
	switch C.nitro_mpi_version(cpath, &buf[0], C.int(len(buf))) {
	case -1:
		return "", fmt.Errorf("mpi: cannot load %s (%s): install Open MPI (apt-get install openmpi-bin libopenmpi-dev) or set $%s to its libmpi", C.GoString(cpath), dlerror(), EnvLibrary)
	case -2:
		return "", fmt.Errorf("mpi: %s has no MPI_Get_library_version: it is no MPI 3 library; set $%s to Open MPI's libmpi", C.GoString(cpath), EnvLibrary)
	}
	return C.GoString(&buf[0]), nil
}

func dlerror() string {
	if e := C.dlerror(); e != nil {
		return C.GoString(e)
	}
	return "no reason given"
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return strings.TrimRight(s, ", ")
}

func errorString(rc C.int) string {
	var buf [512]C.char
	C.nitro_mpi_error_string(rc, &buf[0], C.int(len(buf)))
	if s := C.GoString(&buf[0]); s != "" {
		return fmt.Sprintf("%s (MPI error %d)", s, int(rc))
	}
	return fmt.Sprintf("MPI error %d", int(rc))
}

// Rank is this process in MPI_COMM_WORLD.
func (c *Comm) Rank() int { return c.rank }

// Size is MPI_COMM_WORLD's size.
func (c *Comm) Size() int { return c.size }

// Version is the first line of MPI_Get_library_version.
func (c *Comm) Version() string { return c.version }

// chunk is the most elements one MPI call takes: its count is a C int.
const chunk = 1 << 30

// AllReduceSum sums buf over every rank, in place (MPI_Allreduce, MPI_IN_PLACE, MPI_SUM).
func (c *Comm) AllReduceSum(buf []float32) error {
	n, rc := inChunks(buf, func(p unsafe.Pointer, n C.int) C.int { return C.nitro_mpi_allreduce_f32((*C.float)(p), n) })
	return c.failed(rc, fmt.Sprintf("MPI_Allreduce of %d floats", n))
}

// AllReduceSum64 is AllReduceSum over float64.
func (c *Comm) AllReduceSum64(buf []float64) error {
	n, rc := inChunks(buf, func(p unsafe.Pointer, n C.int) C.int { return C.nitro_mpi_allreduce_f64((*C.double)(p), n) })
	return c.failed(rc, fmt.Sprintf("MPI_Allreduce of %d doubles", n))
}

// Broadcast copies rank root's buf into every rank's (MPI_Bcast); the lengths must be equal.
func (c *Comm) Broadcast(buf []byte, root int) error {
	if root < 0 || root >= c.size {
		return fmt.Errorf("mpi: Broadcast from rank %d of %d", root, c.size)
	}
	n, rc := inChunks(buf, func(p unsafe.Pointer, n C.int) C.int { return C.nitro_mpi_bcast(p, n, C.int(root)) })
	return c.failed(rc, fmt.Sprintf("MPI_Bcast of %d bytes from rank %d", n, root))
}

// inChunks calls call on buf's successive pieces of at most chunk elements (an MPI count is a C
// int), and returns the failing piece's length and MPI's code, or 0, 0.
func inChunks[T any](buf []T, call func(p unsafe.Pointer, n C.int) C.int) (int, C.int) {
	for len(buf) > 0 {
		n := min(len(buf), chunk)
		if rc := call(unsafe.Pointer(&buf[0]), C.int(n)); rc != 0 {
			return n, rc
		}
		buf = buf[n:]
	}
	return 0, 0
}

// failed is nil for a code of 0, else an error naming the call, the rank and MPI's text for the
// code.
func (c *Comm) failed(rc C.int, what string) error {
	if rc == 0 {
		return nil
	}
	return fmt.Errorf("mpi: %s on rank %d of %d: %s", what, c.rank, c.size, errorString(rc))
}

// Close finalizes MPI (MPI_Finalize): every rank calls it once, at the end of the run; mpirun
// reports a process that exits without it as failed.
func (c *Comm) Close() error {
	return c.failed(C.nitro_mpi_finalize(), "MPI_Finalize")
}

// Abort ends every process of the run with code (MPI_Abort): what a rank that fails calls, so
// that the others, possibly waiting in a collective for it, stop too.
func (c *Comm) Abort(code int) { C.nitro_mpi_abort(C.int(code)) }
