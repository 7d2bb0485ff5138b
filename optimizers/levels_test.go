package optimizers_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/gomlx/gopjrt/dtypes"

	"github.com/nitro-go/nitro/optimizers"
)

func TestLevel0IsRAdamWithDecayOnlyWhenNeeded(t *testing.T) {
	l := twoLeafLayout(t, dtypes.Float32)
	setup := optimizers.GroupSetup{Name: "default", Layout: l, NoDecay: l.NoDecayMask(nil)}
	c, err := optimizers.BuildRuleChain(nil, setup)
	if err != nil {
		t.Fatal(err)
	}
	if d := c.Describe(); d != "radam(beta1=0.9,beta2=0.999,eps=1e-08,threshold=5)" {
		t.Errorf("Level 0 with lambda 0 = %q, want bare RAdam (no Decay at all)", d)
	}
	setup.Lambda = 1e-4
	c, _ = optimizers.BuildRuleChain(nil, setup)
	if !c.HasDecay() || !strings.HasSuffix(c.Describe(), "decay(anchor=zero,mask=leaf)") {
		t.Errorf("lambda > 0 should append Decay: %q", c.Describe())
	}
	setup.Lambda, setup.Scheduled = 0, []string{"lambda"}
	c, _ = optimizers.BuildRuleChain(nil, setup)
	if !c.HasDecay() {
		t.Errorf("a scheduled lambda needs the Decay tail even at base 0: %q", c.Describe())
	}
}

func TestLevel1BuildsTheNamedRule(t *testing.T) {
	l := twoLeafLayout(t, dtypes.Float32)
	c, err := optimizers.BuildRuleChain(optimizers.NewMomentum(), optimizers.GroupSetup{Name: "head", Layout: l, Lambda: 0.1, Anchor: optimizers.AnchorW0, Scheduled: []string{"eta", "rho"}})
	if err != nil {
		t.Fatal(err)
	}
	if c.Describe() != "momentum() > decay(anchor=w0,mask=none)" || !slices.Equal(c.HyperFields(), []string{"eta", "rho", "lambda"}) {
		t.Errorf("got %q reading %v", c.Describe(), c.HyperFields())
	}
}

func TestLevel1Refusals(t *testing.T) {
	l := twoLeafLayout(t, dtypes.Float32)
	_, err := optimizers.BuildRuleChain(adamW{Eta: 1e-3, Beta1: 0.9, Beta2: 0.999, Lambda: 0.01}, optimizers.GroupSetup{Name: "head", Layout: l})
	mustContain(t, err, `group "head"`, "rule adamw has its own weight-decay field Lambda", "decay twice", "Level 2")
	_, err = optimizers.BuildRuleChain(optimizers.NewRAdam(), optimizers.GroupSetup{Name: "head", Layout: l, Scheduled: []string{"beta2"}})
	mustContain(t, err, `group "head"`, "field Beta2 of rule radam is nonschedulable")
	_, err = optimizers.BuildRuleChain(optimizers.NewRAdam(), optimizers.GroupSetup{Name: "head", Layout: l, Lambda: -1})
	mustContain(t, err, "lambda is -1", ">= 0")
	_, err = optimizers.BuildRuleChain(optimizers.Momentum{}, optimizers.GroupSetup{Name: "head", Layout: l})
	mustContain(t, err, `group "head"`, "Rho is 0")
}

func TestLevel2FactoryBinding(t *testing.T) {
	l := twoLeafLayout(t, dtypes.Float32)
	factory := func(g optimizers.GroupSetup) (*optimizers.Chain, error) {
		radam, err := optimizers.RAdam{Beta1: 0.9, Beta2: 0.99, Eps: 1e-8}.Build()
		if err != nil {
			return nil, err
		}
		return optimizers.NewChain(radam, optimizers.Decay(g.Anchor, g.NoDecay))
	}
	setup := optimizers.GroupSetup{Name: "backbone", Layout: l, Lambda: 1e-4, Anchor: optimizers.AnchorW0, NoDecay: l.NoDecayMask(nil), Scheduled: []string{"eta", "lambda", "rho"}}
	c, b, err := optimizers.BuildFactoryChain(factory, setup)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(b.Used, []string{"eta", "lambda"}) || !slices.Equal(b.Unused, []string{"rho"}) || b.Chain != c.Describe() {
		t.Errorf("binding %+v: want used [eta lambda], unused [rho]", b)
	}

	setup.Scheduled = []string{"eps"}
	_, _, err = optimizers.BuildFactoryChain(factory, setup)
	mustContain(t, err, `group "backbone"`, `"eps" is nonschedulable`)

	boom := errors.New("boom")
	_, _, err = optimizers.BuildFactoryChain(func(optimizers.GroupSetup) (*optimizers.Chain, error) { return nil, boom }, setup)
	if !errors.Is(err, boom) {
		t.Errorf("factory error not wrapped: %v", err)
	}
	_, _, err = optimizers.BuildFactoryChain(func(optimizers.GroupSetup) (*optimizers.Chain, error) { return &optimizers.Chain{}, nil }, setup)
	mustContain(t, err, "empty chain", "NewChain")
	_, _, err = optimizers.BuildFactoryChain(nil, setup)
	mustContain(t, err, "nil chain factory", "BuildRuleChain")
}
