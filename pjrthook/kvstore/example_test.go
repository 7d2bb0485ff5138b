package kvstore_test

import (
	"fmt"
	"time"

	"github.com/nitro-go/nitro/pjrthook/kvstore"
)

func Example() {
	srv, err := kvstore.Serve("127.0.0.1:0") // rank 0, at the coordinator address
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	c := kvstore.NewClient(srv.Addr()) // every rank
	defer c.Close()
	_ = c.Put("rank/1", []byte("hello"))
	v, _ := c.Get("rank/1", time.Second)
	_, err = c.TryGet("rank/2")
	fmt.Println(string(v), err)
	// Output: hello kvstore: key not found
}
