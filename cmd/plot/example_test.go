package plot_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/nitro-go/nitro/cmd/plot"
)

// Read a run's metrics.jsonl and draw its figures: here a 3-epoch run with a train metric
// ("accuracy"), val_accuracy and val_loss per epoch, and data_wait_frac per epoch. It has no
// timing, so there is no steps_per_second.png (run.Warnings says so).
func Example() {
	run, err := plot.Read("testdata/metrics.jsonl")
	if err != nil {
		log.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "plot-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	files, err := plot.Write(run, dir)
	if err != nil {
		log.Fatal(err)
	}
	for _, f := range files {
		fmt.Println(filepath.Base(f))
	}
	// Output:
	// train_loss.png
	// train_accuracy.png
	// val_accuracy.png
	// val_loss.png
	// data_wait_frac.png
	// index.md
}
