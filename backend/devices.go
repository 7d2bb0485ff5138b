package backend

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/gomlx/gopjrt/pjrt"
)

// EnvCPUDevices sets how many devices the XLA CPU plugin presents ("4"); empty keeps the plugin's
// own count. The CPU devices share the machine's cores, so more of them is a way to run and test
// data-parallel programs, not a speedup; a Nitro uses one unless told otherwise (Devices).
const EnvCPUDevices = "NITRO_CPU_DEVICES"

// cpuClientOptions is the XLA CPU plugin's (for backend name; none for pure Go) client options from $NITRO_CPU_DEVICES, and the text it
// adds to the shared-client key (two counts are two clients). A value that is not a positive
// integer is an error naming the variable.
func cpuClientOptions(name string) (pjrt.NamedValuesMap, string, error) {
	s := strings.TrimSpace(os.Getenv(EnvCPUDevices))
	if s == "" || name != XLA {
		return nil, "", nil
	}
	k, err := strconv.Atoi(s)
	if err != nil || k < 1 {
		return nil, "", fmt.Errorf("$%s = %q: want a positive integer (the CPU plugin's device count), or leave it unset for the plugin's own", EnvCPUDevices, s)
	}
	return pjrt.NamedValuesMap{"cpu_device_count": int64(k)}, ":cpu_devices=" + s, nil
}
