package pjrthook

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"google.golang.org/protobuf/encoding/protowire"
)

// The variables of the cross-process compiles a fake rank runs after its create.
const (
	envFakeCompile   = "NITRO_PJRTHOOK_FAKE_COMPILE"   // set: compile the three programs below
	envFakeWidenings = "NITRO_PJRTHOOK_FAKE_WIDENINGS" // where the rank writes LastWidening after each
	envFakeOptions   = "FAKE_PJRT_OPTIONS"             // read by testdata/fakepjrt.c
)

// The programs a fake rank compiles, in order: the reserved one, another, the reserved one with
// options that do not parse.
var (
	xprocessCode  = "module @" + XProcessModule + " {}"
	otherCode     = "module @jit_other {}"
	malformedOpts = []byte{0x1a, 0x7f, 0x01} // field 3, bytes, length 127: past the end
)

// oneDeviceOptions are compile options as gopjrt serializes a one-device, non-portable compile:
// device_ordinal -1, one replica, one partition, an assignment of device 10, and a field of the
// build options the widening must keep (use_spmd_partitioning).
func oneDeviceOptions() []byte {
	var da []byte
	da = protowire.AppendTag(da, assignReplicas, protowire.VarintType)
	da = protowire.AppendVarint(da, 1)
	da = protowire.AppendTag(da, assignComputes, protowire.VarintType)
	da = protowire.AppendVarint(da, 1)
	dev := protowire.AppendTag(nil, computeDeviceIDs, protowire.BytesType)
	dev = protowire.AppendBytes(dev, protowire.AppendVarint(nil, 10))
	da = protowire.AppendTag(da, assignComputeDev, protowire.BytesType)
	da = protowire.AppendBytes(da, dev)
	var b []byte
	b = protowire.AppendTag(b, 1, protowire.VarintType) // device_ordinal
	b = protowire.AppendVarint(b, ^uint64(0))           // -1: an int64 field's varint is its two's complement
	b = protowire.AppendTag(b, buildReplicas, protowire.VarintType)
	b = protowire.AppendVarint(b, 1)
	b = protowire.AppendTag(b, buildPartitions, protowire.VarintType)
	b = protowire.AppendVarint(b, 1)
	b = protowire.AppendTag(b, 6, protowire.VarintType) // use_spmd_partitioning
	b = protowire.AppendVarint(b, 1)
	b = protowire.AppendTag(b, buildAssignment, protowire.BytesType)
	b = protowire.AppendBytes(b, da)
	var o []byte
	o = protowire.AppendTag(o, optBuildOptions, protowire.BytesType)
	o = protowire.AppendBytes(o, b)
	o = protowire.AppendTag(o, optPortable, protowire.VarintType)
	return protowire.AppendVarint(o, 0)
}

// compileFakeXProcess is a fake rank's compiles (see the variables above): after each, the
// rank's LastWidening as one line of the widenings file.
func compileFakeXProcess(plugin string, client unsafe.Pointer, widenings string) error {
	var report strings.Builder
	for _, c := range []struct {
		code string
		opts []byte
	}{{xprocessCode, oneDeviceOptions()}, {otherCode, oneDeviceOptions()}, {xprocessCode, malformedOpts}} {
		if _, err := compileThroughWith(plugin, client, c.code, c.opts); err != nil {
			return err
		}
		w := LastWidening()
		fmt.Fprintf(&report, "seq=%d replicas=%d assignment=%v err=%v\n", w.Seq, w.Replicas, w.Assignment, w.Err)
	}
	return os.WriteFile(widenings, []byte(report.String()), 0o644)
}

// builtOptions reads back what the tests check of serialized compile options.
type builtOptions struct {
	replicas, partitions, ordinal int64
	assignment                    []int64
	portable, spmd                bool
}

func readOptions(t *testing.T, b []byte) builtOptions {
	t.Helper()
	var o builtOptions
	must := func(err error) {
		if err != nil {
			t.Fatalf("the plugin's options do not parse: %v", err)
		}
	}
	value := func(field []byte) ([]byte, uint64) {
		rest := field[tagLen(field):]
		if _, typ, _ := protowire.ConsumeField(field); typ == protowire.BytesType {
			v, _ := protowire.ConsumeBytes(rest)
			return v, 0
		}
		v, _ := protowire.ConsumeVarint(rest)
		return nil, v
	}
	must(eachField(b, func(num protowire.Number, _ protowire.Type, f []byte) error {
		v, n := value(f)
		switch num {
		case optPortable:
			o.portable = n != 0
		case optBuildOptions:
			return eachField(v, func(num protowire.Number, _ protowire.Type, f []byte) error {
				v, n := value(f)
				switch num {
				case 1:
					o.ordinal = int64(n)
				case buildReplicas:
					o.replicas = int64(n)
				case buildPartitions:
					o.partitions = int64(n)
				case 6:
					o.spmd = n != 0
				case buildAssignment:
					return eachField(v, func(num protowire.Number, _ protowire.Type, f []byte) error {
						if num != assignComputeDev {
							return nil
						}
						dev, _ := value(f)
						return eachField(dev, func(_ protowire.Number, _ protowire.Type, f []byte) error {
							ids, _ := value(f)
							for len(ids) > 0 {
								id, k := protowire.ConsumeVarint(ids)
								if k < 0 {
									return protowire.ParseError(k)
								}
								o.assignment = append(o.assignment, int64(id))
								ids = ids[k:]
							}
							return nil
						})
					})
				}
				return nil
			})
		}
		return nil
	}))
	return o
}

// Two real processes compile through the interposer over a client of the fake plugin that spans
// them: the reserved program reaches the plugin as one replica per process, each on its process's
// lowest device id (10 and 11: not contiguous), one partition, not portable, its other build
// options kept; another program's options reach it byte for byte; options of the reserved program
// that do not parse reach it byte for byte too, with the fault recorded, and nothing panics.
func TestXProcessWidenedOverTwoProcesses(t *testing.T) {
	const world = 2
	dirs := make([]string, world)
	for r := range dirs {
		dirs[r] = t.TempDir()
	}
	dir := runFakeRanks(t, world, func(r int) []string {
		return []string{envFakeCompile + "=1", envFakeWidenings + "=" + filepath.Join(dirs[r], "widenings"),
			envFakeOptions + "=" + filepath.Join(dirs[r], "options")}
	})
	given := oneDeviceOptions()
	for r := range world {
		read := func(n int) []byte {
			b, err := os.ReadFile(filepath.Join(dirs[r], fmt.Sprintf("options.%d", n)))
			if err != nil {
				t.Fatalf("rank %d: the plugin recorded no options for compile %d: %v", r, n, err)
			}
			return b
		}
		got := readOptions(t, read(1))
		want := builtOptions{replicas: 2, partitions: 1, ordinal: -1, assignment: []int64{10, 11}, spmd: true}
		if got.replicas != want.replicas || got.partitions != want.partitions || got.ordinal != want.ordinal ||
			!slices.Equal(got.assignment, want.assignment) || got.portable || !got.spmd {
			t.Errorf("rank %d: the reserved program's options reached the plugin as %+v, want %+v", r, got, want)
		}
		if b := read(2); !bytes.Equal(b, given) {
			t.Errorf("rank %d: another program's options changed on the way: %x, given %x", r, b, given)
		}
		if b := read(3); !bytes.Equal(b, malformedOpts) {
			t.Errorf("rank %d: malformed options reached the plugin as %x, given %x", r, b, malformedOpts)
		}
		report, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("report-%d", r)))
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("compile 1 got compile 1 of node %d\n", 1-r); !strings.Contains(string(report), want) {
			t.Errorf("rank %d: after SetDistributed(0, 1, nil) the client's callbacks no longer reach the store: the report lacks %q:\n%s", r, want, report)
		}
		w, err := os.ReadFile(filepath.Join(dirs[r], "widenings"))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(w)), "\n")
		if len(lines) != 3 || lines[0] != "seq=1 replicas=2 assignment=[10 11] err=<nil>" ||
			lines[1] != lines[0] || // another program is no widening
			!strings.HasPrefix(lines[2], "seq=2 replicas=0 assignment=[] err=pjrthook: widening "+XProcessModule) ||
			!strings.Contains(lines[2], "compile options") {
			t.Errorf("rank %d: widenings\n%s", r, w)
		}
	}
}

// The assignment takes each process's lowest device id, and refuses a device list it cannot
// trust: a process with no device, or this process's first addressable device not its lowest.
func TestAssignProcesses(t *testing.T) {
	got, err := assignProcesses([]int64{10, 11, 20, 21}, []int{0, 1, 0, 1}, 1, 11)
	if err != nil || !slices.Equal(got, []int64{10, 11}) {
		t.Fatalf("assignment %v, %v; want [10 11]", got, err)
	}
	if got, err := assignProcesses([]int64{3, 4}, []int{0, 0}, 0, 3); err != nil || got != nil {
		t.Fatalf("one process: %v, %v; want nil, nil", got, err)
	}
	for _, tc := range []struct {
		ids   []int64
		procs []int
		own   int
		first int64
		want  string
	}{
		{[]int64{1, 2}, []int{0, 2}, 0, 1, "no device of process 1"},
		{[]int64{1, 2}, []int{0, 1}, 1, 7, "first addressable device is 7"},
		{nil, nil, 0, -1, "no devices"},
		{[]int64{1, 2}, []int{0, -1}, 0, 1, "process index -1"},
	} {
		if _, err := assignProcesses(tc.ids, tc.procs, tc.own, tc.first); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("assignProcesses(%v, %v): %v, want %q", tc.ids, tc.procs, err, tc.want)
		}
	}
}

// Options that are not a compile options message, or that already ask for several replicas, are
// refused with an error naming the field; none panics.
func TestWidenOptionsRefuses(t *testing.T) {
	many := protowire.AppendTag(nil, buildReplicas, protowire.VarintType)
	many = protowire.AppendVarint(many, 4)
	several := protowire.AppendBytes(protowire.AppendTag(nil, optBuildOptions, protowire.BytesType), many)
	for _, tc := range []struct {
		opts []byte
		want string
	}{
		{malformedOpts, "compile options"},
		{nil, "no executable_build_options"},
		{[]byte{0xff}, "compile options"},
		{protowire.AppendVarint(protowire.AppendTag(nil, optBuildOptions, protowire.VarintType), 1), "wire type"},
		{several, "compiled for 4 replicas"},
	} {
		if _, err := widenOptions(tc.opts, []int64{0, 1}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("widenOptions(%x): %v, want %q", tc.opts, err, tc.want)
		}
	}
}

func FuzzWidenOptions(f *testing.F) {
	f.Add(oneDeviceOptions())
	f.Add(malformedOpts)
	f.Fuzz(func(t *testing.T, b []byte) {
		out, err := widenOptions(b, []int64{5, 9})
		if err != nil {
			return
		}
		if o := readOptions(t, out); o.replicas != 2 || !slices.Equal(o.assignment, []int64{5, 9}) {
			t.Fatalf("widened %x into %+v", b, o)
		}
	})
}
