package backend

import (
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// The CPU plugin presents the count $NITRO_CPU_DEVICES asks for, each count its own client.
func TestCPUDevicesEnv(t *testing.T) {
	for _, k := range []int{2, 3} {
		t.Setenv(EnvCPUDevices, map[int]string{2: "2", 3: " 3 "}[k])
		r, err := Resolve(XLA)
		if err != nil {
			t.Fatal(err)
		}
		if got := r.Backend.NumDevices(); got != k {
			t.Fatalf("%s=%d: the backend has %d devices", EnvCPUDevices, k, got)
		}
	}
}

// A count that is not a positive integer, or one past MaxCPUDevices (100000 stalled setup for
// minutes with no word), is an error naming the variable, never a silent default or a stall.
func TestCPUDevicesEnvRefused(t *testing.T) {
	for _, v := range []string{"0", "-1", "four", "1025", "100000"} {
		t.Setenv(EnvCPUDevices, v)
		_, err := Resolve(XLA)
		if err == nil || !strings.Contains(err.Error(), EnvCPUDevices) || strings.Contains(err.Error(), "does not load") {
			t.Fatalf("%s=%q: err = %v, want one naming %s (and not blaming the plugin)", EnvCPUDevices, v, err, EnvCPUDevices)
		}
	}
	t.Setenv(EnvCPUDevices, "four")
	if _, err := Resolve(Go); err != nil {
		t.Fatalf("the pure-Go backend has no CPU device count and must ignore %s: %v", EnvCPUDevices, err)
	}
}

// Unset, the count is the plugin's own, except on a machine with fewer CPUs than that: one device
// per CPU there, so the plugin's intra-op pool (a thread per device) does not outnumber the cores.
func TestCPUDevicesDefault(t *testing.T) {
	t.Setenv(EnvCPUDevices, "")
	opts, key, err := cpuClientOptions(XLA)
	if err != nil {
		t.Fatal(err)
	}
	n := runtime.NumCPU()
	if n >= pluginCPUDevices {
		if opts != nil || key != "" {
			t.Fatalf("%d CPUs: options %v, key %q; want the plugin's own count", n, opts, key)
		}
		return
	}
	if got, ok := opts["cpu_device_count"].(int64); !ok || got != int64(n) || key != ":cpu_devices="+strconv.Itoa(n) {
		t.Fatalf("%d CPUs: options %v, key %q; want cpu_device_count %d", n, opts, key, n)
	}
	r, err := Resolve(XLA)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Backend.NumDevices(); got != n {
		t.Fatalf("%d CPUs, %s unset: the backend has %d devices, want %d", n, EnvCPUDevices, got, n)
	}
}
