package tblog_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"

	"github.com/nitro-go/nitro/logjson"
	"github.com/nitro-go/nitro/tblog"
)

// A run recorded twice: the JSON Lines record and TensorBoard's event files.
func ExampleWithJSON() {
	run, err := os.MkdirTemp("", "tblog-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(run)

	l := tblog.WithJSON(run) // pass it to core.WithLogger, with core.WithRunDir(run)
	steps := []logjson.Metrics{
		{Step: 1, Epoch: 1, Context: logjson.ContextTrain, Values: map[string]float64{"loss": 0.9}},
		{Step: 2, Epoch: 1, Context: logjson.ContextTrain, Values: map[string]float64{"loss": 0.7}},
		{Step: 2, Epoch: 1, Context: logjson.ContextValidate, Values: map[string]float64{"val_accuracy": 0.8}},
	}
	if err := l.LogParams(map[string]any{"learning_rate": 0.01}); err != nil {
		log.Fatal(err)
	}
	for _, m := range steps {
		if err := l.LogMetrics(m); err != nil {
			log.Fatal(err)
		}
	}
	if err := l.Finish(logjson.StatusCompleted); err != nil {
		log.Fatal(err)
	}
	w := l.Members()[1].(*tblog.Writer)
	name, _ := filepath.Rel(run, w.Path())
	fmt.Println(strings.HasPrefix(name, filepath.Join("tb", "events.out.tfevents.")), w.Records(), "records")
	// Output: true 6 records
}
