package backend_test

import (
	"strings"
	"testing"

	"github.com/nitro-go/nitro/backend"
)

// TestNoPluginNamesTheDirVariable: every message about a missing plugin (the fallback's warning
// and reason, a forced xla's error) names $NITRO_PJRT_DIR beside `nitro setup`, for a user whose
// plugin is already on disk somewhere nitro does not look.
func TestNoPluginNamesTheDirVariable(t *testing.T) {
	isolate(t)
	r, err := backend.Resolve("")
	if err != nil {
		t.Fatal(err)
	}
	_, forced := backend.Resolve(backend.XLA)
	if forced == nil {
		t.Fatal("forced xla with no plugin must fail")
	}
	for what, msg := range map[string]string{"warning": r.Warning, "reason": r.Reason, "forced error": forced.Error(), "SetupHint": backend.SetupHint} {
		for _, want := range []string{"`nitro setup`", "$" + backend.EnvPluginDir + " to the plugin file or its folder"} {
			if !strings.Contains(msg, want) {
				t.Errorf("%s lacks %q: %q", what, want, msg)
			}
		}
	}
}
