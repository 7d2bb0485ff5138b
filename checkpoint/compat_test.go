package checkpoint_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/nitro-go/nitro/checkpoint"
)

func TestCheckConfigCompatible(t *testing.T) {
	was := checkpoint.Values{GraphConst: map[string]string{"Hidden": "256", "Depth": "2"}, Device: map[string]string{"Dropout": "0.1"}, Host: map[string]string{"DataDir": "/a"}}
	now := checkpoint.Values{GraphConst: map[string]string{"Hidden": "256", "Depth": "2"}, Device: map[string]string{"Dropout": "0.2"}, Host: map[string]string{"DataDir": "/a", "Limit": "10"}}
	notes, err := checkpoint.CheckConfigCompatible("ck.safetensors", was, now)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"Device field Dropout: checkpoint 0.1, now 0.2", "Host field Limit: checkpoint (absent), now 10"}
	if !slices.Equal(notes, want) {
		t.Errorf("notes %q, want %q", notes, want)
	}
	now.GraphConst["Hidden"] = "512"
	delete(now.GraphConst, "Depth")
	_, err = checkpoint.CheckConfigCompatible("ck.safetensors", was, now)
	for _, w := range []string{"resume from ck.safetensors refused", "field Depth: checkpoint 2, now (absent)", "field Hidden: checkpoint 256, now 512"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("error %v lacks %q", err, w)
		}
	}
}
