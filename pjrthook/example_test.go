package pjrthook_test

import (
	"fmt"

	"github.com/nitro-go/nitro/pjrthook"
	"github.com/nitro-go/nitro/pjrthook/kvstore"
)

// A process that is rank 1 of 2 creates its PJRT clients with node_id, num_nodes and the store's
// callbacks from then on; rank 0 serves the store at the coordinator address.
func ExampleSetDistributed() {
	store := pjrthook.StoreOf(kvstore.NewClient("node0:7070"))
	if err := pjrthook.SetDistributed(1, 2, store); err != nil {
		panic(err)
	}
	fmt.Println(pjrthook.Distributed())
	_ = pjrthook.SetDistributed(0, 1, nil) // one process again
	fmt.Println(pjrthook.Distributed())
	// Output:
	// 1 2
	// 0 1
}

// The program named XProcessModule is widened over the client's processes when compiled through
// the interposer; LastWidening says how the last such compile went (no fault here).
func ExampleLastWidening() {
	w := pjrthook.LastWidening()
	fmt.Println(pjrthook.XProcessModule, w.Err)
	// Output:
	// nitro_xprocess_allreduce <nil>
}
