package checkpoint

import (
	"strings"
	"testing"
)

func TestFilename(t *testing.T) {
	for _, tc := range []struct {
		args NameArgs
		want string
	}{
		{NameArgs{Epoch: 6, Step: 4500, Metric: "val_loss", Score: 0.041683123, Scored: true}, "epoch-0006-step-4500-val_loss=0.0416831.safetensors"},
		{NameArgs{Epoch: 6, Step: 4500, Metric: "val_loss"}, "epoch-0006-step-4500.safetensors"},
		{NameArgs{Epoch: 43, Step: 32250, Metric: "mae", Score: -1.234567e-7, Scored: true}, "epoch-0043-step-32250-mae=-1.23457e-07.safetensors"},
		{NameArgs{Epoch: 12345, Step: 0, Metric: "val loss/top-1 %", Score: 3, Scored: true}, "epoch-12345-step-0-val_loss_top-1__=3.safetensors"},
		{NameArgs{Epoch: 0, Step: 1, Metric: "", Score: 0, Scored: true}, "epoch-0000-step-1-metric=0.safetensors"},
		{NameArgs{Epoch: 1, Step: 2, Metric: "ünï", Score: 1e300, Scored: true}, "epoch-0001-step-2-_n_=1e+300.safetensors"},
	} {
		got := Filename(tc.args)
		if got != tc.want {
			t.Errorf("Filename(%+v) = %q, want %q", tc.args, got, tc.want)
		}
		back, err := ParseFilename(got)
		if err != nil {
			t.Errorf("ParseFilename(%q): %v", got, err)
			continue
		}
		if back.Epoch != tc.args.Epoch || back.Step != tc.args.Step || back.Scored != tc.args.Scored ||
			(back.Scored && back.Metric != SanitizeMetric(tc.args.Metric)) {
			t.Errorf("ParseFilename(%q) = %+v", got, back)
		}
		if strings.Trim(got, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-=+") != "" {
			t.Errorf("%q has characters outside the safe set", got)
		}
	}
	if Filename(NameArgs{Epoch: 9}) >= Filename(NameArgs{Epoch: 10}) {
		t.Error("lexicographic order is not epoch order")
	}
}

func TestParseFilenameRefuses(t *testing.T) {
	for _, s := range []string{
		"epoch-0006-step-4500.jld2",
		"ep-0006-step-4500.safetensors",
		"epoch-006-step-4500.safetensors",
		"epoch-0006-step-.safetensors",
		"epoch-0006-step-45a0.safetensors",
		"epoch-0006-step-4500-val_loss.safetensors",
		"epoch-0006-step-4500-=1.safetensors",
		"epoch-0006-step-4500-val_loss=NaN.safetensors",
		"epoch-0006-step-4500-val_loss=abc.safetensors",
		"epoch-0006-step-4500-val loss=1.safetensors",
		"epoch--006-step-1.safetensors",
	} {
		if a, err := ParseFilename(s); err == nil {
			t.Errorf("ParseFilename(%q) = %+v, want an error", s, a)
		}
	}
}
