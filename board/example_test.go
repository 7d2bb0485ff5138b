package board_test

import (
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"

	"github.com/nitro-go/nitro/board"
)

// A Board is an http.Handler over run directories; each request reads what the runs appended
// since the last one. nitro board serves one on 127.0.0.1:6006.
func ExampleNew() {
	dir, _ := os.MkdirTemp("", "run")
	defer os.RemoveAll(dir)
	os.WriteFile(filepath.Join(dir, board.MetricsFile), []byte(`{"type":"params","lr":0.1}
{"type":"metrics","context":"train","epoch":1,"step":1,"loss":2.3}
{"type":"metrics","context":"train","epoch":1,"step":2,"loss":1.9}
{"type":"metrics","context":"train","epoch":1,"st`), 0o644) // the last line is still being written

	b, err := board.New(board.Config{Runs: []string{dir}})
	if err != nil {
		fmt.Println(err)
		return
	}
	srv := httptest.NewServer(b) // or http.ListenAndServe("127.0.0.1:6006", b)
	defer srv.Close()

	r := b.Snapshot()[0]
	fmt.Println(r.Phase, len(r.Train["loss"]), "loss points,", r.Pending, "bytes waiting for their newline")
	// Output: training epoch 1 2 loss points, 49 bytes waiting for their newline
}
