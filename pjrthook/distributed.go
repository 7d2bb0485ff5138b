package pjrthook

/*
#include <stdlib.h>
#include <string.h>
#include "hook.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"sync"
	"time"
	"unsafe"

	"github.com/nitro-go/nitro/pjrthook/kvstore"
)

// Store is the key-value store the ranks of one run share (package kvstore's Client is one,
// through an adapter at the caller): the plugin's client swaps its topology and communicator ids
// through it. Each method is called from plugin threads, concurrently.
type Store interface {
	Put(key string, value []byte) error
	// TryGet answers at once: found false when the key is absent.
	TryGet(key string) (value []byte, found bool, err error)
	// Get waits up to timeout for the key: found false when the wait ran out.
	Get(key string, timeout time.Duration) (value []byte, found bool, err error)
}

// storePrefix keeps the plugin's keys apart from any other user of the same store.
const storePrefix = "nitro/pjrt/"

// PJRT_Error_Code values the callbacks answer with.
const (
	codeDeadlineExceeded = 4
	codeNotFound         = 5
	codeUnavailable      = 14
)

var (
	distMu    sync.Mutex
	distStore Store
	distRank  int
	distWorld int
)

// SetDistributed makes every PJRT client created from now on through the interposer process rank
// of world: its create gets the options node_id = rank and num_nodes = world and the three
// key-value callbacks, backed by store. This is how XLA's GPU plugin spans processes (the
// all-reduce inside the programs becomes NCCL's across them). world <= 1 turns it off for later
// creates (store may then be nil). Clients created before are unchanged, and keep calling the
// store they were created with: the plugin swaps its communicators' ids through it at the first
// collective a program runs, long after the create.
func SetDistributed(rank, world int, store Store) error {
	if world > 1 && (rank < 0 || rank >= world) {
		return fmt.Errorf("pjrthook: rank %d is outside [0, %d): the launcher's rank and world size disagree", rank, world)
	}
	if world > 1 && store == nil {
		return fmt.Errorf("pjrthook: %d processes need a store every rank reaches; got none", world)
	}
	if world > 1<<30 {
		return fmt.Errorf("pjrthook: world size %d is past what a PJRT option holds here", world)
	}
	distMu.Lock()
	defer distMu.Unlock()
	if world <= 1 {
		rank, world, store = 0, 1, distStore // the clients already spanning still need it
	}
	distRank, distWorld, distStore = rank, world, store
	C.nitro_hook_set_distributed(C.int(rank), C.int(world))
	return nil
}

// Distributed reports the setting clients are created under: rank 0 of 1 when off.
func Distributed() (rank, world int) {
	distMu.Lock()
	defer distMu.Unlock()
	if distWorld <= 1 {
		return 0, 1
	}
	return distRank, distWorld
}

func store() Store {
	distMu.Lock()
	defer distMu.Unlock()
	return distStore
}

// kvMessage writes msg into the C buffer the callback reports with.
func kvMessage(buf *C.char, n C.size_t, msg string) {
	b := unsafe.Slice((*byte)(unsafe.Pointer(buf)), int(n))
	b[copy(b[:len(b)-1], msg)] = 0
}

// nitroKVGet is the kv_get (try = 0) and kv_try_get (try = 1) callback: 0 with a malloc'd value
// (the plugin frees it through the deleter), or a PJRT_Error_Code with a message.
//
//export nitroKVGet
func nitroKVGet(key *C.char, keySize C.size_t, timeoutMS C.int, try C.int, value **C.char, size *C.size_t, msg *C.char, msgLen C.size_t) C.int {
	s := store()
	k := C.GoStringN(key, C.int(keySize))
	if s == nil {
		kvMessage(msg, msgLen, "nitro: the client-create piece has no store (SetDistributed never gave one)")
		return codeUnavailable
	}
	var v []byte
	var found bool
	var err error
	if try != 0 {
		v, found, err = s.TryGet(storePrefix + k)
	} else {
		v, found, err = s.Get(storePrefix+k, time.Duration(max(int(timeoutMS), 0))*time.Millisecond)
	}
	switch {
	case err != nil:
		kvMessage(msg, msgLen, fmt.Sprintf("nitro store: %q: %v", k, err))
		return codeUnavailable
	case !found && try != 0:
		kvMessage(msg, msgLen, fmt.Sprintf("nitro store: %q not found", k))
		return codeNotFound
	case !found:
		kvMessage(msg, msgLen, fmt.Sprintf("nitro store: %q was not put within %d ms: a rank did not reach client creation", k, int(timeoutMS)))
		return codeDeadlineExceeded
	}
	*value = (*C.char)(C.CBytes(v))
	*size = C.size_t(len(v))
	return 0
}

// nitroKVPut is the kv_put callback.
//
//export nitroKVPut
func nitroKVPut(key *C.char, keySize C.size_t, value *C.char, valueSize C.size_t, msg *C.char, msgLen C.size_t) C.int {
	s := store()
	k := C.GoStringN(key, C.int(keySize))
	if s == nil {
		kvMessage(msg, msgLen, "nitro: the client-create piece has no store (SetDistributed never gave one)")
		return codeUnavailable
	}
	if err := s.Put(storePrefix+k, C.GoBytes(unsafe.Pointer(value), C.int(valueSize))); err != nil {
		kvMessage(msg, msgLen, fmt.Sprintf("nitro store: putting %q: %v", k, err))
		return codeUnavailable
	}
	return 0
}

// StoreOf is the Store over a client of rank 0's coordinator (package kvstore).
func StoreOf(c *kvstore.Client) Store { return kvStore{c} }

type kvStore struct{ c *kvstore.Client }

var _ Store = kvStore{}

func (s kvStore) Put(key string, value []byte) error { return s.c.Put(key, value) }

func (s kvStore) TryGet(key string) ([]byte, bool, error) { return found(s.c.TryGet(key)) }

func (s kvStore) Get(key string, timeout time.Duration) ([]byte, bool, error) {
	return found(s.c.Get(key, timeout))
}

func found(v []byte, err error) ([]byte, bool, error) {
	if errors.Is(err, kvstore.ErrNotFound) {
		return nil, false, nil
	}
	return v, err == nil, err
}
