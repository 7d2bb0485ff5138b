package backend

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/gomlx/gopjrt/pjrt"
)

// EnvCPUDevices sets how many devices the XLA CPU plugin presents ("4"); empty keeps the plugin's
// own count (pluginCPUDevices), or one per CPU on a machine with fewer CPUs than that. The CPU
// devices share the machine's cores, so more of them is a way to run and test data-parallel
// programs, not a speedup; a Nitro uses one unless told otherwise (Devices).
const EnvCPUDevices = "NITRO_CPU_DEVICES"

// pluginCPUDevices is how many devices the pinned CPU plugin presents when not told.
const pluginCPUDevices = 4

// MaxCPUDevices bounds $NITRO_CPU_DEVICES. The plugin builds every device before it answers, at
// about 1 ms and 85 KB each here (4,096 devices: 5 s and 350 MB more than one), so a typo such as
// 100000 would look like a hang; no data-parallel test needs more than this many.
const MaxCPUDevices = 1024

// cpuClientOptions is the XLA CPU plugin's (for backend name; none for pure Go) client options from $NITRO_CPU_DEVICES, and the text it
// adds to the shared-client key (two counts are two clients). A value that is not a positive
// integer, or one above MaxCPUDevices, is an error naming the variable.
func cpuClientOptions(name string) (pjrt.NamedValuesMap, string, error) {
	s := strings.TrimSpace(os.Getenv(EnvCPUDevices))
	if name != XLA {
		return nil, "", nil
	}
	if s == "" {
		// The pinned plugin presents pluginCPUDevices devices unless told, and its intra-op pool
		// runs a thread per device when they outnumber the CPUs: on 2 cores, 4 threads took
		// turns on them and a step cost more CPU than with 2 (docs/profiling.md, the plugin's
		// threads). So a machine with fewer CPUs gets one device per CPU, the pool one thread each.
		n := runtime.NumCPU()
		if n >= pluginCPUDevices {
			return nil, "", nil
		}
		s = strconv.Itoa(n)
	}
	k, err := strconv.Atoi(s)
	if err != nil || k < 1 {
		return nil, "", fmt.Errorf("$%s = %q: want a positive integer (the CPU plugin's device count), or leave it unset for the plugin's own", EnvCPUDevices, s)
	}
	if k > MaxCPUDevices {
		return nil, "", fmt.Errorf("$%s = %d: at most %d CPU devices (the plugin builds each before it starts, so this many would stall setup): set it to the device count the run needs", EnvCPUDevices, k, MaxCPUDevices)
	}
	return pjrt.NamedValuesMap{"cpu_device_count": int64(k)}, ":cpu_devices=" + s, nil
}
