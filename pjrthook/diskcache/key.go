package diskcache

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"regexp"
	"runtime"
	"strconv"
	"strings"
)

// Target is what the plugin's client says about where a program will run.
type Target struct {
	Platform        string // "cpu", "cuda", ...
	PlatformVersion string
	APIVersion      string // the plugin's PJRT C API version, "major.minor"
	Devices         int    // addressable devices
	DeviceKind      string // the first device's kind ("cpu", "NVIDIA H100 80GB HBM3", ...)
	ProcessIndex    int    // the client's process in a multi-process run
}

// Parts are the key's components, each as a digest or a short text. Two compiles share an entry
// only when every part is equal.
type Parts struct {
	Program  string `json:"program"`  // SHA-256 of the format and code
	Options  string `json:"options"`  // SHA-256 of the serialized compile options
	Plugin   string `json:"plugin"`   // SHA-256 of the plugin file
	Platform string `json:"platform"` // API version, platform name and version, device count and kind
	CPU      string `json:"cpu"`      // SHA-256 of the host CPU's feature flags
	Flags    string `json:"flags"`    // $XLA_FLAGS, which the plugin reads when it compiles
	Build    string `json:"build"`    // the entry format and nitro's cache code version
}

// buildPart is nitro's own build as far as an entry depends on it: the entry format. The
// executable is produced by the plugin from the program and the options, both in the key, so
// the binary that asked for it adds nothing; keying on a hash of the binary would turn every
// rebuild of the user's own program into a cold cache.
const buildPart = "nitro-compile-cache/1"

// Key is the entry's name: SHA-256 over every part, each quoted so no two part lists print alike.
func (p Parts) Key() string {
	var b strings.Builder
	for _, s := range []string{p.Program, p.Options, p.Plugin, p.Platform, p.CPU, p.Flags, p.Build} {
		b.WriteString(strconv.Quote(s))
		b.WriteByte('\n')
	}
	sum := sha256.Sum256([]byte(b.String()))
	return hex.EncodeToString(sum[:])
}

// diff names the parts that moved from old to p, in the words a miss explanation uses.
func (p Parts) diff(old Parts) []string {
	var out []string
	if p.Plugin != old.Plugin {
		out = append(out, "plugin changed")
	}
	if p.CPU != old.CPU {
		out = append(out, "CPU features differ")
	}
	if p.Platform != old.Platform {
		out = append(out, "platform or devices changed")
	}
	if p.Flags != old.Flags {
		out = append(out, "XLA_FLAGS changed")
	}
	if p.Options != old.Options {
		out = append(out, "compile options changed")
	}
	if p.Program != old.Program {
		out = append(out, "program changed")
	}
	if p.Build != old.Build {
		out = append(out, "cache format changed")
	}
	return out
}

func digest(parts ...[]byte) string {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprintf(h, "%d:", len(p))
		h.Write(p)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func platformPart(t Target) string {
	return fmt.Sprintf("api=%s platform=%q version=%q devices=%d kind=%q", t.APIVersion, t.Platform, t.PlatformVersion, t.Devices, t.DeviceKind)
}

// cpuFeatures is the host CPU's feature list as the kernel reports it (x86 "flags", arm64
// "Features"), with the architecture. Where /proc/cpuinfo is absent it is the architecture only:
// the plugin's own check then refuses an executable built for features this host lacks, and the
// refusal is a miss.
func cpuFeatures() string {
	out := runtime.GOOS + "/" + runtime.GOARCH
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return out
	}
	for _, line := range strings.Split(string(b), "\n") {
		name, value, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		if n := strings.TrimSpace(name); n == "flags" || n == "Features" {
			f := strings.Fields(value)
			return out + " " + strings.Join(f, " ")
		}
	}
	return out
}

var moduleName = regexp.MustCompile(`module @"?([A-Za-z0-9_.$-]+)`)

// programName is the module's name in a StableHLO text ("" for other formats or none).
func programName(format string, code []byte) string {
	if format != "mlir" {
		return ""
	}
	head := code
	if len(head) > 4096 {
		head = head[:4096]
	}
	if m := moduleName.FindSubmatch(head); m != nil {
		return string(m[1])
	}
	return ""
}

// signature is a digest of the program's entry function header (its arguments' and results'
// types), "" when there is none to find. Two programs of one name and one signature are most
// likely one model edited; two of other signatures are two models (every experiment's gradient
// program bears the same name), which is what a miss explanation needs to tell apart.
func signature(format string, code []byte) string {
	if format != "mlir" {
		return ""
	}
	for _, head := range [][]byte{[]byte("func.func public @main("), []byte("func.func @main(")} {
		i := bytes.Index(code, head)
		if i < 0 {
			continue
		}
		line := code[i:]
		if j := bytes.IndexByte(line, '\n'); j >= 0 {
			line = line[:j]
		}
		return digest(line)
	}
	return ""
}
