package checkpoint_test

import (
	"fmt"

	"github.com/nitro-go/nitro/checkpoint"
)

// A process that shares the writer's checkpoints reads them through a ReadOnly view; its saves
// write nothing.
func ExampleReadOnly() {
	writer := checkpoint.NewMemory()
	path, _ := writer.Save(&checkpoint.Record{Epoch: 1, Step: 10})
	view := checkpoint.ReadOnly(writer)
	latest, ok, _ := view.Latest()
	rec, _ := view.Load(latest)
	saved, err := view.Save(&checkpoint.Record{Epoch: 2, Step: 20})
	newest, _, _ := writer.Latest()
	fmt.Println(latest == path, ok, rec.Epoch, saved == "", err, newest == path)
	// Output: true true 1 true <nil> true
}
