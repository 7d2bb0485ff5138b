package exportbundle

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/nitro-go/nitro/tensorfile"
)

// The benchmark model is MNIST-sized, so that a request's JSON is what a real client sends: 784
// features, 128 hidden (tanh), 10 classes, at batch sizes 1 and 32.
const benchIn, benchHidden, benchOut = 784, 128, 10

// benchName is the benchmark bundle's name, its /v2 model name.
const benchName = "mnist_mlp"

var (
	benchOnce sync.Once
	benchDir  string
	benchErr  error
)

// benchBundleDir writes (once per process) the MNIST-sized MLP bundle.
func benchBundleDir(tb testing.TB) string {
	tb.Helper()
	plugin := requirePlugin(tb)
	benchOnce.Do(func() {
		rng := rand.New(rand.NewPCG(3, 4))
		mk := func(name string, shape ...int) Weight {
			n := 1
			for _, d := range shape {
				n *= d
			}
			v := randF32(rng, n)
			for i := range v {
				v[i] *= 0.05
			}
			t, _ := NewTensor(shape, v)
			return Weight{Name: name, Tensor: t}
		}
		ws := []Weight{mk("w1", benchIn, benchHidden), mk("b1", benchHidden), mk("w2", benchHidden, benchOut), mk("b2", benchOut)}
		progs := map[int]Program{}
		for _, n := range []int{1, 32} {
			got, err := Capture(plugin, func(b backends.Backend) error {
				e, err := graph.NewExec(b, mlpGraph)
				if err != nil {
					return err
				}
				defer e.Finalize()
				x, _ := NewTensor([]int{n, benchIn}, make([]float32, n*benchIn))
				args := []any{gomlxTensor(x)}
				for _, w := range ws {
					args = append(args, gomlxTensor(w.Tensor))
				}
				_, err = e.Exec(args...)
				return err
			})
			if err != nil {
				benchErr = err
				return
			}
			progs[n] = got[0]
		}
		var tmp string
		if tmp, benchErr = os.MkdirTemp("", "exportbundle-bench-"); benchErr != nil {
			return
		}
		tmpDirs = append(tmpDirs, tmp)
		benchDir = filepath.Join(tmp, "mnist_mlp")
		benchErr = Write(benchDir, &Bundle{
			Name:    benchName,
			Inputs:  []TensorSpec{{Name: "image", DType: tensorfile.F32, Shape: []int{-1, benchIn}, BatchAxis: 0}},
			Outputs: []TensorSpec{{Name: "logits", DType: tensorfile.F32, Shape: []int{-1, benchOut}, BatchAxis: 0}, {Name: "probs", DType: tensorfile.F32, Shape: []int{-1, benchOut}, BatchAxis: 0}},
			Weights: ws, Programs: progs,
		})
	})
	if benchErr != nil {
		tb.Fatal(benchErr)
	}
	return benchDir
}

// benchBody is a /predict body of batch images with pixel-like values (three significant
// digits, as a client printing [0,1] floats sends).
func benchBody(batch int, seed uint64) ([]byte, Tensor) {
	rng := rand.New(rand.NewPCG(seed, 5))
	var b bytes.Buffer
	v := make([]float32, 0, batch*benchIn)
	b.WriteString(`{"inputs": {"image": [`)
	for i := range batch {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('[')
		for j := range benchIn {
			if j > 0 {
				b.WriteByte(',')
			}
			f := float32(rng.IntN(1000)) / 1000
			v = append(v, f)
			b.WriteString(strconv.FormatFloat(float64(f), 'g', -1, 32))
		}
		b.WriteByte(']')
	}
	b.WriteString("]}}")
	t, _ := NewTensor([]int{batch, benchIn}, v)
	return b.Bytes(), t
}

// serveBench opens the benchmark bundle and serves it on loopback with MaxConcurrent 8, both
// closed when b ends; it returns the runner and the server's address.
func serveBench(b *testing.B) (*Runner, string) {
	r, err := Open(benchBundleDir(b), requirePlugin(b))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { r.Close() })
	srv, addr, err := ServeWith(r, "127.0.0.1:0", ServeConfig{MaxConcurrent: 8})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { srv.Close() })
	return r, addr.String()
}

type loadResult struct {
	reqs          int
	perSec        float64
	p50, p99, max time.Duration
}

// load runs clients goroutines, each calling do back to back for d, and returns the rate and
// the latency percentiles of every call.
func load(tb testing.TB, clients int, d time.Duration, do func() error) loadResult {
	var mu sync.Mutex
	var lat []time.Duration
	var wg sync.WaitGroup
	start := time.Now()
	end := start.Add(d)
	var firstErr error
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			for time.Now().Before(end) {
				t0 := time.Now()
				if err := do(); err != nil {
					mu.Lock()
					firstErr = err
					mu.Unlock()
					return
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	if firstErr != nil {
		tb.Fatal(firstErr)
	}
	elapsed := time.Since(start)
	slices.Sort(lat)
	pct := func(p float64) time.Duration { return lat[min(len(lat)-1, int(p*float64(len(lat))))] }
	return loadResult{reqs: len(lat), perSec: float64(len(lat)) / elapsed.Seconds(), p50: pct(0.50), p99: pct(0.99), max: lat[len(lat)-1]}
}

// BenchmarkServeLoad prints requests/s and p50/p99 latency for 8 concurrent clients at batch 1
// and 2 at batch 32, three ways: over loopback HTTP (nitro serve), through the handler in memory
// (run-bundle's path: the same JSON decoding and encoding, no network), and Runner.Run on
// tensors already decoded (no JSON). The ratios are measured in one run; absolute figures
// depend on the machine and its load.
//
//	go test -run '^$' -bench BenchmarkServeLoad -benchtime 1x ./exportbundle/
func BenchmarkServeLoad(b *testing.B) {
	r, addr := serveBench(b)
	url := "http://" + addr + "/predict"
	cfg := DefaultServeConfig()
	cfg.MaxConcurrent = 8
	h := newHandler(r, cfg)
	const each = 700 * time.Millisecond
	var table strings.Builder
	fmt.Fprintf(&table, "\n%-28s %7s %9s %9s %9s\n", "path (clients x batch)", "req/s", "p50", "p99", "requests")
	for range b.N {
		for _, sc := range []struct{ clients, batch int }{{8, 1}, {2, 32}} {
			body, x := benchBody(sc.batch, 1)
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: sc.clients}}
			httpDo := func() error { return postOK(client, url, body) }
			handlerDo := func() error {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/predict", bytes.NewReader(body)))
				if rec.Code != http.StatusOK {
					return fmt.Errorf("handler %d: %s", rec.Code, rec.Body.String())
				}
				return nil
			}
			runDo := func() error {
				_, err := r.Run(sc.batch, map[string]Tensor{"image": x})
				return err
			}
			for _, do := range []func() error{httpDo, handlerDo, runDo} { // compile and warm up
				if err := do(); err != nil {
					b.Fatal(err)
				}
			}
			res := map[string]loadResult{}
			for _, p := range []struct {
				name string
				do   func() error
			}{{"HTTP loopback", httpDo}, {"handler in memory", handlerDo}, {"Runner.Run", runDo}} {
				res[p.name] = load(b, sc.clients, each, p.do)
				l := res[p.name]
				fmt.Fprintf(&table, "%-28s %7.0f %9s %9s %9d\n", fmt.Sprintf("%s (%dx%d)", p.name, sc.clients, sc.batch), l.perSec,
					l.p50.Round(time.Microsecond), l.p99.Round(time.Microsecond), l.reqs)
			}
			hh, hm, rr := res["HTTP loopback"], res["handler in memory"], res["Runner.Run"]
			fmt.Fprintf(&table, "  %dx%d: HTTP/in-memory handler p50 %.2fx, req/s %.2fx; HTTP/Runner.Run p50 %.2fx, req/s %.2fx; body %d bytes\n",
				sc.clients, sc.batch, float64(hh.p50)/float64(hm.p50), hm.perSec/hh.perSec, float64(hh.p50)/float64(rr.p50), rr.perSec/hh.perSec, len(body))
			b.ReportMetric(float64(hh.p50)/float64(rr.p50), fmt.Sprintf("http/run-p50-%dx%d", sc.clients, sc.batch))
			if sc.batch == 1 {
				// Dynamic batching, measured where it would act: batch-1 requests queued together
				// merged into one program call (the batch-32 program, padded), against a Run each.
				merged := mergedRuns(r, 32)
				mr := load(b, sc.clients, each, func() error { return merged(x) })
				fmt.Fprintf(&table, "%-28s %7.0f %9s %9s %9d\n", fmt.Sprintf("Run, merged (%dx%d)", sc.clients, sc.batch), mr.perSec,
					mr.p50.Round(time.Microsecond), mr.p99.Round(time.Microsecond), mr.reqs)
				// The program's share of an HTTP request, and what merging could save of it.
				f, m := hh.perSec/rr.perSec, mr.perSec/rr.perSec
				fmt.Fprintf(&table, "  dynamic batching: merged/direct Run req/s %.2fx; the program call is ~%.0f%% of an HTTP request, so merging would change HTTP req/s by about %.2fx\n",
					m, 100*f, 1/((1-f)+f/m))
			}
			client.CloseIdleConnections()
		}
	}
	fmt.Print(table.String()) // not b.Log, which cuts a benchmark's output at ten lines
}

// postOK posts body to url and reads the answer, an error unless it is a 200.
func postOK(client *http.Client, url string, body []byte) error {
	resp, err := client.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return nil
}

// BenchmarkServeTrickle prints good-request throughput and latency over loopback for 8 clients at
// batch 1 against a server with the default bounds, alone, beside 20 clients trickling valid
// bodies at a byte every 100 ms, and beside those and 128 more trickling at 1.25 KiB/s (just
// above the minimum rate) and coming back 100 ms after each refusal, measured in one run.
// Before reading and running had separate bounds, the first tricklers held every slot and the
// good requests were all 503; before a read slot went to the faster body (trial reads), the 128
// held every read slot and the good requests were all 503 (the benchmark stops at the first).
//
//	go test -run '^$' -bench BenchmarkServeTrickle -benchtime 1x ./exportbundle/
func BenchmarkServeTrickle(b *testing.B) {
	dir := benchBundleDir(b)
	r, err := Open(dir, requirePlugin(b))
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	srv, addr, err := Serve(r, "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	url := "http://" + addr.String() + "/predict"
	body, _ := benchBody(1, 1)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	defer client.CloseIdleConnections()
	do := func() error { return postOK(client, url, body) }
	if err := do(); err != nil { // compile and warm up
		b.Fatal(err)
	}
	const each = time.Second
	var table strings.Builder
	fmt.Fprintf(&table, "\nserver defaults (MaxConcurrent %d, MaxReading %d), 8 good clients x batch 1\n%-34s %7s %9s %9s %9s %9s\n",
		srv.Config().MaxConcurrent, srv.Config().MaxReading, "beside", "req/s", "p50", "p99", "max", "requests")
	for range b.N {
		alone := load(b, 8, each, do)
		if n := trickle(b, addr.String(), 20, body); n > 0 {
			b.Fatalf("%d of 20 trickling clients were refused", n)
		}
		beside := load(b, 8, each, do)
		trickleFast(b, addr.String(), 128, 64<<10, 128, body)
		time.Sleep(time.Second) // every read slot held by a trickling body
		fast := load(b, 8, each, do)
		for _, l := range []struct {
			name string
			res  loadResult
		}{{"nothing", alone}, {"20 trickling clients", beside}, {"+128 at 1.25 KiB/s, retrying", fast}} {
			fmt.Fprintf(&table, "%-34s %7.0f %9s %9s %9s %9d\n", l.name, l.res.perSec, l.res.p50.Round(time.Microsecond),
				l.res.p99.Round(time.Microsecond), l.res.max.Round(time.Microsecond), l.res.reqs)
		}
		fmt.Fprintf(&table, "  with/without trickling clients: req/s %.2fx, with the 128 too %.2fx\n", beside.perSec/alone.perSec, fast.perSec/alone.perSec)
		b.ReportMetric(beside.perSec/alone.perSec, "trickle/alone-req/s")
		b.ReportMetric(fast.perSec/alone.perSec, "trickle128/alone-req/s")
		b.ReportMetric(float64(fast.max.Microseconds())/1e3, "trickle128-max-ms")
	}
	fmt.Print(table.String())
}

// mergedRuns returns a call that runs one batch-1 image through r as part of whatever other
// calls are queued at the same moment: one program call at batch max (padded) for several, a
// batch-1 call for one alone. It is the benchmark's model of dynamic batching, not the server's.
func mergedRuns(r *Runner, max int) func(x Tensor) error {
	type job struct {
		x    Tensor
		done chan error
	}
	jobs := make(chan job, 64)
	go func() {
		for j := range jobs {
			batch := []job{j}
		gather:
			for len(batch) < max {
				select {
				case j := <-jobs:
					batch = append(batch, j)
				default:
					break gather
				}
			}
			var err error
			if len(batch) == 1 {
				_, err = r.Run(1, map[string]Tensor{"image": j.x})
			} else {
				row := len(j.x.Data)
				x := Tensor{DType: tensorfile.F32, Shape: []int{max, benchIn}, Data: make([]byte, max*row)}
				for i, j := range batch {
					copy(x.Data[i*row:], j.x.Data)
				}
				var out map[string]Tensor
				if out, err = r.Run(max, map[string]Tensor{"image": x}); err == nil {
					for _, t := range out { // each caller's rows, as a server would answer them
						n := len(t.Data) / max
						for i := range batch {
							_ = append([]byte(nil), t.Data[i*n:(i+1)*n]...)
						}
					}
				}
			}
			for _, j := range batch {
				j.done <- err
			}
		}
	}()
	return func(x Tensor) error {
		done := make(chan error, 1)
		jobs <- job{x, done}
		return <-done
	}
}

// rssChildEnv, set to a bundle folder, makes the test binary a server (see TestMain): it
// serves the bundle on 127.0.0.1:0 with MaxConcurrent from NITRO_RSS_MAX_CONCURRENT, prints
// "addr HOST:PORT", and exits when its standard input closes.
const rssChildEnv = "NITRO_RSS_CHILD_BUNDLE"

func rssChild(dir string) int {
	r, err := Open(dir, requirePluginPath())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	n, _ := strconv.Atoi(os.Getenv("NITRO_RSS_MAX_CONCURRENT"))
	srv, addr, err := ServeWith(r, "127.0.0.1:0", ServeConfig{MaxConcurrent: n})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("addr %s\n", addr)
	io.Copy(io.Discard, os.Stdin)
	srv.Close()
	return 0
}

// requirePluginPath is the plugin the parent found, passed down in the environment.
func requirePluginPath() string { return os.Getenv("NITRO_RSS_CHILD_PLUGIN") }

// procStatus reads VmHWM (peak resident memory) and VmRSS of pid, in bytes.
func procStatus(tb testing.TB, pid int) (hwm, rss int64) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		tb.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) == 3 && (f[0] == "VmHWM:" || f[0] == "VmRSS:") {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			if f[0] == "VmHWM:" {
				hwm = kb << 10
			} else {
				rss = kb << 10
			}
		}
	}
	return hwm, rss
}

// hostileBody is a well-formed body of about size bytes: rows of width numbers (784 wide: far
// past the largest batch; 783: the wrong shape, and past the batch too).
func hostileBody(size, width int) io.Reader {
	row := "[" + strings.Repeat("0.123,", width-1) + "0.5]"
	n := int64(size / (len(row) + 1))
	return io.MultiReader(strings.NewReader(`{"inputs": {"image": [`), io.LimitReader(&repeat{s: row + ","}, n*int64(len(row)+1)),
		strings.NewReader(row+"]}}"))
}

// hostileV2Body is an infer body of about size bytes whose flat data runs past its shape.
func hostileV2Body(size int) io.Reader {
	head := `{"inputs": [{"name": "image", "shape": [32, ` + strconv.Itoa(benchIn) + `], "datatype": "FP32", "data": [`
	return io.MultiReader(strings.NewReader(head), io.LimitReader(&repeat{s: "0.123,"}, int64(size)), strings.NewReader("0.5]}]}"))
}

// hostileV2Binary is a binary infer body: a JSON header declaring batch 32's binary_data_size,
// then about size bytes, far more than it declared.
func hostileV2Binary(size int) (string, io.Reader) {
	head := fmt.Sprintf(`{"inputs": [{"name": "image", "shape": [32, %d], "datatype": "FP32", "parameters": {"binary_data_size": %d}}]}`, benchIn, 32*benchIn*4)
	return head, io.LimitReader(&repeat{s: "\x00\x01\x02\x03"}, int64(size))
}

// BenchmarkServeRSS runs a server as a child process and prints its peak resident memory
// (VmHWM, from /proc) after a warm-up request, after one 60 MB wrong-shape body, after one 60 MB
// body past the largest batch, after 16 concurrent 10 MB bodies, and on /v2 after a 60 MB JSON
// body and a 60 MB binary body each past its declared size, each as a growth over the
// warm base and as a multiple of the body. The goal is a growth of at most twice the body.
//
//	go test -run '^$' -bench BenchmarkServeRSS -benchtime 1x ./exportbundle/
func BenchmarkServeRSS(b *testing.B) {
	dir := benchBundleDir(b)
	plugin := requirePlugin(b)
	for range b.N {
		for _, maxConc := range []int{16, 0} {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), rssChildEnv+"="+dir, "NITRO_RSS_CHILD_PLUGIN="+plugin, fmt.Sprintf("NITRO_RSS_MAX_CONCURRENT=%d", maxConc))
			stdin, _ := cmd.StdinPipe()
			stdout, _ := cmd.StdoutPipe()
			cmd.Stderr = os.Stderr
			if err := cmd.Start(); err != nil {
				b.Fatal(err)
			}
			line, err := bufio.NewReader(stdout).ReadString('\n')
			if err != nil || !strings.HasPrefix(line, "addr ") {
				b.Fatalf("the child server printed %q (%v)", line, err)
			}
			url := "http://" + strings.TrimSpace(strings.TrimPrefix(line, "addr ")) + "/predict"
			post := func(body io.Reader) (int, string) {
				resp, err := http.Post(url, "application/json", body)
				if err != nil {
					return 0, err.Error() // the server may close before the client has sent all
				}
				defer resp.Body.Close()
				data, _ := io.ReadAll(resp.Body)
				var m map[string]string
				json.Unmarshal(data, &m)
				return resp.StatusCode, m["error"]
			}
			pid := cmd.Process.Pid
			for _, batch := range []int{1, 32} {
				body, _ := benchBody(batch, 2)
				if code, msg := post(bytes.NewReader(body)); code != http.StatusOK {
					b.Fatalf("warm-up at batch %d: %d %s", batch, code, msg)
				}
			}
			base, _ := procStatus(b, pid)
			var out strings.Builder
			fmt.Fprintf(&out, "\nserver MaxConcurrent %d (0: the default, %d): base peak RSS %d MiB after warm-up at batch 1 and 32\n", maxConc, DefaultMaxConcurrent(), base>>20)
			report := func(what string, body int64, answers string) {
				hwm, rss := procStatus(b, pid)
				fmt.Fprintf(&out, "  %-44s peak %4d MiB (+%4d MiB = %.2fx one body), RSS now %4d MiB; %s\n", what, hwm>>20, (hwm-base)>>20, float64(hwm-base)/float64(body), rss>>20, answers)
			}
			const big, small = 60 << 20, 10 << 20
			code, msg := post(hostileBody(big, 783))
			report("one 60 MB body, rows of 783 (wrong shape)", big, fmt.Sprintf("%d %.60s", code, msg))
			code, msg = post(hostileBody(big, 784))
			report("one 60 MB body, rows of 784 past batch 32", big, fmt.Sprintf("%d %.60s", code, msg))
			var wg sync.WaitGroup
			var mu sync.Mutex
			codes := map[int]int{}
			for range 16 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					code, _ := post(hostileBody(small, 784))
					mu.Lock()
					codes[code]++
					mu.Unlock()
				}()
			}
			wg.Wait()
			report("16 concurrent 10 MB bodies past batch 32", small, fmt.Sprintf("status counts %v", codes))
			// The Open Inference Protocol's infer path, under the same bounds: flat JSON data past
			// the declared shape, and a binary body whose bytes run past its binary_data_size.
			v2 := strings.TrimSuffix(url, "/predict") + "/v2/models/" + benchName + "/infer"
			v2post := func(body io.Reader, header string) (int, string) {
				req, _ := http.NewRequest(http.MethodPost, v2, body)
				if header != "" {
					req.Header.Set(inferenceHeaderLength, header)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					return 0, err.Error()
				}
				defer resp.Body.Close()
				data, _ := io.ReadAll(resp.Body)
				var m map[string]string
				json.Unmarshal(data, &m)
				return resp.StatusCode, m["error"]
			}
			code, msg = v2post(hostileV2Body(big), "")
			report("/v2: one 60 MB JSON body, data past the shape", big, fmt.Sprintf("%d %.60s", code, msg))
			head, raw := hostileV2Binary(big)
			code, msg = v2post(io.MultiReader(strings.NewReader(head), raw), strconv.Itoa(len(head)))
			report("/v2: one 60 MB binary body past its size", big, fmt.Sprintf("%d %.60s", code, msg))
			stdin.Close()
			cmd.Wait()
			fmt.Print(out.String())
		}
	}
}

// BenchmarkDecodeRequest is the decoder alone on a batch-32 MNIST body (147 KB of JSON).
func BenchmarkDecodeRequest(b *testing.B) {
	body, _ := benchBody(32, 1)
	specs := []TensorSpec{{Name: "image", DType: tensorfile.F32, Shape: []int{-1, benchIn}, BatchAxis: 0}}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for range b.N {
		if _, err := decodeRequest(bytes.NewReader(body), specs, []int{1, 32}); err != nil {
			b.Fatal(err)
		}
	}
}
