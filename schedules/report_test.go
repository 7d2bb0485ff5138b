package schedules_test

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nitro-go/nitro/schedules"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

func reportBindings() []schedules.Binding {
	return []schedules.Binding{
		{Group: "backbone", Name: "eta", Value: "WarmupCosine: 1e-04 at step 1", Source: "schedule eta x accessor LearningRate(backbone)", Scheduled: true, Note: "ratio 0.1 of default"},
		{Name: "threshold", Value: "0.5", Source: "schedule device.threshold", Scheduled: true},
		{Name: "accum", Value: "2", Source: "Nitro option"},
		{Name: "gradient_clip_norm", Value: "1", Source: "preset small"},
		{Group: "backbone", Name: "lambda", Value: "1e-4", Source: "accessor Lambda(backbone)"},
		{Group: "backbone", Name: "anchor", Value: "w0", Source: "accessor DecayAnchor(backbone)"},
		{Group: "head", Name: "eta", Value: "WarmupCosine: 1e-03 at step 1", Source: "schedule eta", Scheduled: true},
		{Group: "head", Name: "momentum", Value: "0.9", Source: "schedule momentum", Scheduled: true, Unread: true},
		{Group: "head", Name: "anchor", Value: "zero", Source: "default"},
		{Group: "head", Name: "epsilon", Source: ""},
	}
}

func TestReportGolden(t *testing.T) {
	got := schedules.Report(reportBindings())
	path := filepath.Join("testdata", "binding_report.golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./schedules -update to create it)", err)
	}
	if got != string(want) {
		t.Fatalf("Report differs from %s (rerun with -update if intended):\n--- got\n%s--- want\n%s", path, got, want)
	}
}

func TestReportProperties(t *testing.T) {
	got := schedules.Report(reportBindings())
	for _, line := range strings.Split(got, "\n") {
		if strings.HasSuffix(line, " ") {
			t.Errorf("trailing space in %q", line)
		}
	}
	if !strings.HasPrefix(got, "binding report: 10 values, 4 scheduled, 1 scheduled but not read by their group's chain\n") {
		t.Errorf("header: %q", strings.SplitN(got, "\n", 2)[0])
	}
	// Sections: run-wide first, then groups in first-appearance order.
	run, bb, head := strings.Index(got, "\nrun-wide\n"), strings.Index(got, "\ngroup backbone\n"), strings.Index(got, "\ngroup head\n")
	if run < 0 || bb < run || head < bb {
		t.Errorf("sections out of order: run-wide %d, backbone %d, head %d", run, bb, head)
	}
	if !strings.Contains(got, "NOT READ by this group's chain") {
		t.Error("an unread scheduled value is not flagged")
	}
	if empty := schedules.Report(nil); empty != "binding report: 0 values, 0 scheduled\n" {
		t.Errorf("Report(nil) = %q", empty)
	}
}
