package dist

import (
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	for _, d := range []Dist{Single(), {Rank: 1, WorldSize: 2}, {Rank: 3, WorldSize: 4}} {
		if err := d.Validate(); err != nil {
			t.Errorf("%v: %v", d, err)
		}
	}
	for _, c := range []struct {
		d    Dist
		want string
	}{
		{Dist{}, "WorldSize 0"},
		{Dist{Rank: 2, WorldSize: 2}, "Rank 2 with WorldSize 2: the rank must be in [0, 2)"},
		{Dist{Rank: -1, WorldSize: 2}, "Rank -1"},
	} {
		err := c.d.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: got %v, want %q", c.d, err, c.want)
		}
	}
	if !Single().IsRank0() || (Dist{Rank: 1, WorldSize: 2}).IsRank0() {
		t.Error("IsRank0")
	}
}

func env(kv map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := kv[k]; return v, ok }
}

func TestFromEnv(t *testing.T) {
	d, err := FromEnv(env(nil))
	if err != nil || d != Single() {
		t.Errorf("unset: %v, %v; want rank 0 of 1", d, err)
	}
	d, err = FromEnv(env(map[string]string{EnvRank: "1", EnvWorldSize: "4"}))
	if err != nil || d != (Dist{Rank: 1, WorldSize: 4, Source: SourceNitro}) {
		t.Errorf("1 of 4: %v, %v", d, err)
	}
	for _, c := range []struct {
		kv   map[string]string
		want string
	}{
		{map[string]string{EnvRank: "1"}, `NITRO_RANK="1" is set and NITRO_WORLD_SIZE is not`},
		{map[string]string{EnvWorldSize: "2"}, `NITRO_WORLD_SIZE="2" is set and NITRO_RANK is not`},
		{map[string]string{EnvRank: "2", EnvWorldSize: "2"}, `NITRO_RANK="2" with NITRO_WORLD_SIZE=2: want an integer in [0, 2)`},
		{map[string]string{EnvRank: "-1", EnvWorldSize: "2"}, `NITRO_RANK="-1"`},
		{map[string]string{EnvRank: "x", EnvWorldSize: "2"}, `NITRO_RANK="x"`},
		{map[string]string{EnvRank: "0", EnvWorldSize: "0"}, `NITRO_WORLD_SIZE="0": want an integer >= 1`},
		{map[string]string{EnvRank: "0", EnvWorldSize: "two"}, `NITRO_WORLD_SIZE="two"`},
	} {
		_, err := FromEnv(env(c.kv))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: got %v, want %q", c.kv, err, c.want)
		}
	}
}
