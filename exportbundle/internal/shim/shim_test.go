package shim

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/nitro-go/nitro/internal/prereq"
)

// TestLayoutMatchesPJRTHeader compiles a probe against the pjrt_c_api.h that gopjrt (at the pinned
// version) builds with, and checks that the shim's own declarations put PJRT_Client_Compile, the
// compile arguments' program and the program's format where that header does.
func TestLayoutMatchesPJRTHeader(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/gomlx/gopjrt").Output()
	if err != nil {
		prereq.GopjrtHeader.Absent(t, fmt.Sprintf("go list gopjrt: %v", err))
	}
	header := filepath.Join(strings.TrimSpace(string(out)), "pjrt")
	if _, err := os.Stat(filepath.Join(header, "pjrt_c_api.h")); err != nil {
		prereq.GopjrtHeader.Absent(t, err)
	}
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "gcc"
	}
	if _, err := exec.LookPath(cc); err != nil {
		prereq.CCompiler.Absent(t, err)
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "probe.c")
	const probe = `#include <stdio.h>
#include <stddef.h>
#include "pjrt_c_api.h"
int main(void) {
	printf("%zu %zu %zu %d\n", offsetof(PJRT_Api, PJRT_Client_Compile),
	       offsetof(PJRT_Client_Compile_Args, program), offsetof(PJRT_Program, format), PJRT_API_MAJOR);
	return 0;
}
`
	if err := os.WriteFile(src, []byte(probe), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "probe")
	if msg, err := exec.Command(cc, "-I", header, "-o", bin, src).CombinedOutput(); err != nil {
		t.Fatalf("compiling the probe: %v\n%s", err, msg)
	}
	got, err := exec.Command(bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	a, b, c := Offsets()
	want := strings.Join([]string{itoa(a), itoa(b), itoa(c), "0"}, " ")
	if strings.TrimSpace(string(got)) != want {
		t.Fatalf("pjrt_c_api.h says (compile, program, format, major) = %s; the shim assumes %s", strings.TrimSpace(string(got)), want)
	}
}

func itoa(u uintptr) string { return strconv.FormatUint(uint64(u), 10) }

func TestAPIRefusesNonPlugin(t *testing.T) {
	f := filepath.Join(t.TempDir(), "x.so")
	if err := os.WriteFile(f, []byte("nope"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := API(f); err == nil {
		t.Fatal("a non-plugin file was accepted")
	}
}
