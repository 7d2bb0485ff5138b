package pjrthook

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nitro-go/nitro/pjrthook/kvstore"
)

// The variables that make the test binary one rank of the fake-plugin run (see TestMain).
const (
	envFakeRank   = "NITRO_PJRTHOOK_FAKE_RANK"
	envFakeWorld  = "NITRO_PJRTHOOK_FAKE_WORLD"
	envFakeAddr   = "NITRO_PJRTHOOK_FAKE_ADDR"
	envFakePlugin = "NITRO_PJRTHOOK_FAKE_PLUGIN"
	// Rank 0 keeps serving the store until this file exists: the test writes it once the other
	// ranks have exited, so none reads a closed connection on its last answer.
	envFakeRelease = "NITRO_PJRTHOOK_FAKE_RELEASE"
	envFakeReport  = "FAKE_PJRT_REPORT" // read by testdata/fakepjrt.c
)

// childRuns: each variable, set to the real plugin's path, makes the test binary run its
// function on it instead of the tests (runInChild), in a process whose plugin slots are its own.
var childRuns = []struct {
	env, what string
	run       func(plugin string) error
}{
	{envRealWiden, "real widen", realWiden},
	{envClientCycles, "client cycles", clientCycles},
}

func TestMain(m *testing.M) {
	for _, c := range childRuns {
		if plugin := os.Getenv(c.env); plugin != "" {
			if err := c.run(plugin); err != nil {
				fmt.Fprintf(os.Stderr, "%s: %v\n", c.what, err)
				os.Exit(1)
			}
			os.Exit(0)
		}
	}
	if os.Getenv(envFakeRank) != "" {
		if err := runFakeRank(); err != nil {
			fmt.Fprintln(os.Stderr, "rank:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// runFakeRank is one process of the two-process test: rank 0 serves the store; each rank creates
// a client of the fake plugin through the interposer, then says it is done; rank 0 keeps serving
// until every rank is.
func runFakeRank() error {
	rank, err := strconv.Atoi(os.Getenv(envFakeRank))
	if err != nil {
		return err
	}
	world, err := strconv.Atoi(os.Getenv(envFakeWorld))
	if err != nil {
		return err
	}
	addr, plugin := os.Getenv(envFakeAddr), os.Getenv(envFakePlugin)
	if rank == 0 {
		srv, err := kvstore.Serve(addr)
		if err != nil {
			return err
		}
		defer srv.Close()
	}
	c := kvstore.NewClient(addr)
	defer c.Close()
	if _, err := Register(plugin); err != nil {
		return err
	}
	if err := SetDistributed(rank, world, StoreOf(c)); err != nil {
		return err
	}
	client, err := createThrough(plugin, "caller_option", 7)
	if err != nil {
		return err
	}
	if os.Getenv(envFakeCompile) != "" {
		// As the backend does once its client is up: later creates are single-process again,
		// while this client still swaps through the store.
		if err := SetDistributed(0, 1, nil); err != nil {
			return err
		}
		if err := compileFakeXProcess(plugin, client, os.Getenv(envFakeWidenings)); err != nil {
			return err
		}
	}
	if err := c.Put(fmt.Sprintf("done/%d", rank), nil); err != nil {
		return err
	}
	for r := 0; rank == 0 && r < world; r++ {
		if _, err := c.Get(fmt.Sprintf("done/%d", r), 30*time.Second); err != nil {
			return err
		}
	}
	for deadline := time.Now().Add(60 * time.Second); rank == 0; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(os.Getenv(envFakeRelease)); err == nil {
			break
		} else if time.Now().After(deadline) {
			return fmt.Errorf("the test never released rank 0: %w", err)
		}
	}
	return nil
}

// buildFakePlugin compiles testdata/fakepjrt.c into a shared library in a temporary folder.
func buildFakePlugin(t *testing.T) string {
	header, cc := pjrtHeader(t), cCompiler(t)
	so := filepath.Join(t.TempDir(), "pjrt_c_api_fake_plugin.so")
	if msg, err := exec.Command(cc, "-shared", "-fPIC", "-I", header, "-o", so, "testdata/fakepjrt.c").CombinedOutput(); err != nil {
		t.Fatalf("compiling the fake plugin: %v\n%s", err, msg)
	}
	return so
}

func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// runFakeRanks starts world copies of the test binary as the ranks of a fake-plugin run (each
// with the variables extra gives it) and waits for them; each writes its report into dir.
func runFakeRanks(t *testing.T, world int, extra func(rank int) []string) (dir string) {
	so := buildFakePlugin(t)
	addr := freeAddr(t)
	dir = t.TempDir()
	release := filepath.Join(dir, "release")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmds := make([]*exec.Cmd, world)
	outs := make([]strings.Builder, world)
	for r := range world {
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), envFakeRank+"="+strconv.Itoa(r), envFakeWorld+"="+strconv.Itoa(world),
			envFakeAddr+"="+addr, envFakePlugin+"="+so, envFakeReport+"="+filepath.Join(dir, fmt.Sprintf("report-%d", r)),
			envFakeRelease+"="+release)
		if extra != nil {
			cmd.Env = append(cmd.Env, extra(r)...)
		}
		cmd.Stdout, cmd.Stderr = &outs[r], &outs[r]
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds[r] = cmd
	}
	failed := false
	for r := range world { // rank 0 last: it serves the others until released
		r = (r + 1) % world
		if r == 0 {
			if err := os.WriteFile(release, nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := cmds[r].Wait(); err != nil {
			t.Errorf("rank %d: %v\n%s", r, err, outs[r].String())
			failed = true
		}
	}
	if failed {
		for r := range world {
			b, _ := os.ReadFile(filepath.Join(dir, fmt.Sprintf("report-%d", r)))
			t.Logf("rank %d's plugin report:\n%s", r, b)
		}
		t.FailNow()
	}
	return dir
}

// Two real processes create a client of the fake plugin through the interposer: each create gets
// node_id and num_nodes from the launcher's rank and world, keeps the caller's own option, and
// gets all three callbacks, through which each rank reads the other's value.
func TestClientCreateSpansTwoProcesses(t *testing.T) {
	const world = 2
	dir := runFakeRanks(t, world, nil)
	for r := range world {
		b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("report-%d", r)))
		if err != nil {
			t.Fatalf("rank %d wrote no report: %v", r, err)
		}
		report := string(b)
		other := 1 - r
		for _, want := range []string{
			"option caller_option 7\n",
			fmt.Sprintf("option node_id %d\n", r),
			"option num_nodes 2\n",
			"callbacks get=1 try_get=1 put=1\n",
			fmt.Sprintf("put fake/%d ok\n", r),
			fmt.Sprintf("get fake/%d from node %d deleter=1\n", other, other),
			"try_get fake/absent code 5\n", // NOT_FOUND, at once
			fmt.Sprintf("try_get fake/%d from node %d\n", r, r),
		} {
			if !strings.Contains(report, want) {
				t.Errorf("rank %d's plugin report lacks %q:\n%s", r, want, report)
			}
		}
	}
}

// A single process's create passes through untouched: no options added, no callbacks.
func TestClientCreateUntouchedForOneProcess(t *testing.T) {
	so := buildFakePlugin(t)
	report := filepath.Join(t.TempDir(), "report")
	t.Setenv(envFakeReport, report)
	if _, err := Register(so); err != nil {
		t.Fatal(err)
	}
	if err := SetDistributed(0, 1, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := createThrough(so, "caller_option", 3); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	if want := "option caller_option 3\ncallbacks get=0 try_get=0 put=0\n"; string(b) != want {
		t.Fatalf("one process: the plugin got\n%s\nwant\n%s", b, want)
	}
	if r, w := Distributed(); r != 0 || w != 1 {
		t.Fatalf("Distributed() = %d, %d; want 0, 1", r, w)
	}
}

func TestSetDistributedRefuses(t *testing.T) {
	c := StoreOf(kvstore.NewClient("127.0.0.1:1"))
	for _, tc := range []struct {
		rank, world int
		store       Store
		want        string
	}{
		{2, 2, c, "rank 2 is outside [0, 2)"},
		{-1, 4, c, "rank -1"},
		{0, 2, nil, "need a store"},
	} {
		if err := SetDistributed(tc.rank, tc.world, tc.store); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("SetDistributed(%d, %d): %v, want %q", tc.rank, tc.world, err, tc.want)
		}
	}
	if r, w := Distributed(); r != 0 || w != 1 {
		t.Fatalf("a refused setting changed the state: %d of %d", r, w)
	}
}
