package promexport_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/nitro-go/nitro/logjson"
	"github.com/nitro-go/nitro/promexport"
)

// Start the exporter on a free loopback port, log one train line, read the loss back the way
// Prometheus would, from /metrics, and close the exporter.
func Example() {
	exp, err := promexport.New(promexport.Options{Addr: "127.0.0.1:0"})
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = exp.LogMetrics(logjson.Metrics{Step: 1, Epoch: 1, Context: logjson.ContextTrain,
		Values: map[string]float64{"loss": 0.25}})

	var body []byte
	resp, err := http.Get("http://" + exp.Addr() + "/metrics")
	if err == nil {
		body, err = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	if cerr := exp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		fmt.Println(err)
		return
	}
	for line := range strings.Lines(string(body)) {
		if strings.HasPrefix(line, "nitro_loss ") {
			fmt.Print(line)
		}
	}
	// Output: nitro_loss 0.25
}
