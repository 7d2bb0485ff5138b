package pjrthook

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nitro-go/nitro/internal/prereq"
)

// pjrtHeader is the folder of the pjrt_c_api.h gopjrt (at the pinned version) builds with.
func pjrtHeader(t *testing.T) string {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/gomlx/gopjrt").Output()
	if err != nil {
		prereq.GopjrtHeader.Absent(t, fmt.Sprintf("go list gopjrt: %v", err))
	}
	header := filepath.Join(strings.TrimSpace(string(out)), "pjrt")
	if _, err := os.Stat(filepath.Join(header, "pjrt_c_api.h")); err != nil {
		prereq.GopjrtHeader.Absent(t, err)
	}
	return header
}

// cCompiler is $CC, or gcc.
func cCompiler(t *testing.T) string {
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "gcc"
	}
	if _, err := exec.LookPath(cc); err != nil {
		prereq.CCompiler.Absent(t, err)
	}
	return cc
}

// TestLayoutMatchesPJRTHeader compiles a probe against the pjrt_c_api.h gopjrt (at the pinned
// version) builds with, and checks that every slot and field the interposer uses lies where that
// header puts it.
func TestLayoutMatchesPJRTHeader(t *testing.T) {
	header, cc := pjrtHeader(t), cCompiler(t)
	slots := []struct {
		name string
		slot int
	}{
		{"PJRT_Error_Destroy", 0}, {"PJRT_Error_Message", 1}, {"PJRT_Client_Create", 10},
		{"PJRT_Client_Destroy", 11},
		{"PJRT_Client_PlatformName", 12},
		{"PJRT_Client_ProcessIndex", 13}, {"PJRT_Client_PlatformVersion", 14},
		{"PJRT_Client_Devices", 15},
		{"PJRT_Client_AddressableDevices", 16}, {"PJRT_Client_Compile", 20},
		{"PJRT_DeviceDescription_Id", 23}, {"PJRT_DeviceDescription_ProcessIndex", 24},
		{"PJRT_DeviceDescription_Kind", 26}, {"PJRT_Device_GetDescription", 29},
		{"PJRT_Executable_Destroy", 40}, {"PJRT_Executable_Serialize", 49},
		{"PJRT_LoadedExecutable_Destroy", 50}, {"PJRT_LoadedExecutable_GetExecutable", 51},
		{"PJRT_LoadedExecutable_Delete", 53},
		{"PJRT_Executable_DeserializeAndLoad", 56},
	}
	var probe strings.Builder
	probe.WriteString("#include <stdio.h>\n#include <stddef.h>\n#include \"pjrt_c_api.h\"\nint main(void) {\n")
	var want []string
	for _, s := range slots {
		fmt.Fprintf(&probe, "\tprintf(\"%%zu \", offsetof(PJRT_Api, %s));\n", s.name)
		want = append(want, fmt.Sprint(slotOffset(s.slot)))
	}
	arg := func(i int) string { return fmt.Sprint(argLayout(i)) }
	// The argument structs the C side declares itself: sizes and the fields read back.
	fields := []struct{ expr, want string }{
		{"offsetof(PJRT_Client_Compile_Args, program)", fmt.Sprint(programInArgsOffset())},
		{"offsetof(PJRT_Client_Compile_Args, executable)", fmt.Sprint(executableInArgsOffset())},
		{"offsetof(PJRT_Program, format)", fmt.Sprint(formatInProgramOffset())},
		{"sizeof(PJRT_Error_Message_Args)", arg(0)}, {"sizeof(PJRT_Error_Destroy_Args)", arg(1)},
		{"sizeof(PJRT_Client_PlatformName_Args)", arg(2)}, {"sizeof(PJRT_Client_PlatformVersion_Args)", arg(2)},
		{"offsetof(PJRT_Client_ProcessIndex_Args, process_index)", arg(3)},
		{"sizeof(PJRT_Client_AddressableDevices_Args)", arg(4)}, {"sizeof(PJRT_Device_GetDescription_Args)", arg(5)},
		{"sizeof(PJRT_DeviceDescription_Kind_Args)", arg(6)}, {"sizeof(PJRT_LoadedExecutable_GetExecutable_Args)", arg(7)},
		{"sizeof(PJRT_Executable_Destroy_Args)", arg(8)}, {"sizeof(PJRT_LoadedExecutable_Destroy_Args)", arg(8)},
		// The release hooks read the freed object's pointer through destroy_args.
		{"sizeof(PJRT_LoadedExecutable_Delete_Args)", arg(8)}, {"sizeof(PJRT_Client_Destroy_Args)", arg(8)},
		{"offsetof(PJRT_LoadedExecutable_Destroy_Args, executable)", arg(35)},
		{"offsetof(PJRT_LoadedExecutable_Delete_Args, executable)", arg(35)},
		{"offsetof(PJRT_Client_Destroy_Args, client)", arg(35)},
		{"sizeof(PJRT_Executable_Serialize_Args)", arg(9)},
		{"offsetof(PJRT_Executable_Serialize_Args, serialized_executable_deleter)", arg(10)},
		{"sizeof(PJRT_Executable_DeserializeAndLoad_Args)", arg(11)},
		{"offsetof(PJRT_Executable_DeserializeAndLoad_Args, loaded_executable)", arg(12)},
		{"sizeof(PJRT_NamedValue)", arg(13)}, {"offsetof(PJRT_NamedValue, type)", arg(14)},
		{"offsetof(PJRT_NamedValue, int64_value)", arg(15)}, {"offsetof(PJRT_NamedValue, value_size)", arg(16)},
		{"sizeof(PJRT_Client_Create_Args)", arg(17)},
		{"offsetof(PJRT_Client_Create_Args, kv_get_callback)", arg(18)},
		{"offsetof(PJRT_Client_Create_Args, kv_put_callback)", arg(19)},
		{"offsetof(PJRT_Client_Create_Args, client)", arg(20)},
		{"offsetof(PJRT_Client_Create_Args, kv_try_get_callback)", arg(21)},
		{"sizeof(PJRT_KeyValueGetCallback_Args)", arg(22)},
		{"offsetof(PJRT_KeyValueGetCallback_Args, timeout_in_ms)", arg(23)},
		{"offsetof(PJRT_KeyValueGetCallback_Args, callback_error)", arg(24)},
		{"offsetof(PJRT_KeyValueGetCallback_Args, value)", arg(25)},
		{"offsetof(PJRT_KeyValueGetCallback_Args, value_deleter_callback)", arg(26)},
		{"sizeof(PJRT_KeyValueTryGetCallback_Args)", arg(27)},
		{"offsetof(PJRT_KeyValueTryGetCallback_Args, callback_error)", arg(28)},
		{"offsetof(PJRT_KeyValueTryGetCallback_Args, value)", arg(29)},
		{"offsetof(PJRT_KeyValueTryGetCallback_Args, value_deleter_callback)", arg(30)},
		{"sizeof(PJRT_KeyValuePutCallback_Args)", arg(31)},
		{"offsetof(PJRT_KeyValuePutCallback_Args, value)", arg(32)},
		{"offsetof(PJRT_KeyValuePutCallback_Args, callback_error)", arg(33)},
		{"offsetof(PJRT_KeyValuePutCallback_Args, user_arg)", arg(34)},
		{"sizeof(PJRT_Client_Devices_Args)", arg(4)},
		{"sizeof(PJRT_DeviceDescription_Id_Args)", arg(36)}, {"sizeof(PJRT_DeviceDescription_ProcessIndex_Args)", arg(36)},
		{"offsetof(PJRT_DeviceDescription_Id_Args, id)", arg(37)},
		{"offsetof(PJRT_DeviceDescription_ProcessIndex_Args, process_index)", arg(37)},
		{"PJRT_API_MAJOR", "0"},
	}
	for _, f := range fields {
		fmt.Fprintf(&probe, "\tprintf(\"%%zu \", (size_t)(%s));\n", f.expr)
		want = append(want, f.want)
	}
	probe.WriteString("\treturn 0;\n}\n")
	dir := t.TempDir()
	src := filepath.Join(dir, "probe.c")
	if err := os.WriteFile(src, []byte(probe.String()), 0o644); err != nil {
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
	g := strings.Fields(string(got))
	if len(g) != len(want) {
		t.Fatalf("probe printed %v", g)
	}
	for i := range want {
		name := "field"
		if i < len(slots) {
			name = slots[i].name
		} else {
			name = fields[i-len(slots)].expr
		}
		if g[i] != want[i] {
			t.Errorf("%s: pjrt_c_api.h says %s, the interposer assumes %s", name, g[i], want[i])
		}
	}
}

func TestRegisterRefusesNonPlugin(t *testing.T) {
	f := filepath.Join(t.TempDir(), "x.so")
	if err := os.WriteFile(f, []byte("nope"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Register(f); err == nil || !strings.Contains(err.Error(), f) {
		t.Fatalf("a non-plugin file: err = %v, want a refusal naming it", err)
	}
}
