package sweep

import (
	"math"
	"reflect"
	"strings"
	"testing"
)

func mustParse(t *testing.T, s string) Param {
	t.Helper()
	p, err := ParseParam(s)
	if err != nil {
		t.Fatalf("ParseParam(%q): %v", s, err)
	}
	return p
}

func TestParseParam(t *testing.T) {
	cases := []struct {
		in   string
		want Param
	}{
		{"LearningRate=loguniform:1e-4,1e-2", Param{Name: "LearningRate", Kind: LogUniform, Low: 1e-4, High: 1e-2}},
		{"Dropout=uniform:0,0.5", Param{Name: "Dropout", Kind: Uniform, Low: 0, High: 0.5}},
		{"Layers=int:1,4", Param{Name: "Layers", Kind: Int, Low: 1, High: 4}},
		{"Hidden=choice:64,128,256", Param{Name: "Hidden", Kind: Choice, Choices: []string{"64", "128", "256"}}},
		{"Act=choice:relu,gelu", Param{Name: "Act", Kind: Choice, Choices: []string{"relu", "gelu"}}},
		{" Act = choice: relu, gelu ", Param{Name: "Act", Kind: Choice, Choices: []string{"relu", "gelu"}}},
		{"Only=choice:x", Param{Name: "Only", Kind: Choice, Choices: []string{"x"}}},
		{"Fixed=uniform:0.1,0.1", Param{Name: "Fixed", Kind: Uniform, Low: 0.1, High: 0.1}},
		{"Neg=int:-3,-1", Param{Name: "Neg", Kind: Int, Low: -3, High: -1}},
		{"Path=choice:a=b,c:d", Param{Name: "Path", Kind: Choice, Choices: []string{"a=b", "c:d"}}},
	}
	for _, c := range cases {
		got := mustParse(t, c.in)
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("ParseParam(%q) = %+v, want %+v", c.in, got, c.want)
		}
	}
}

func TestParseParamErrors(t *testing.T) {
	cases := []struct {
		in   string
		want []string // every piece must be in the error
	}{
		{"LearningRate", []string{`"LearningRate"`, "no '='", "Name=kind:args"}},
		{"=uniform:0,1", []string{"name", "empty"}},
		{"X=normal:0,1", []string{"X", `unknown kind "normal"`, "uniform, loguniform, int, choice"}},
		{"X=uniform", []string{"X", "no ':'"}},
		{"X=uniform:0", []string{"X", "two numbers", "got 1"}},
		{"X=uniform:0,1,2", []string{"X", "got 3"}},
		{"X=uniform:0,inf", []string{"X", `"inf"`, "finite"}},
		{"X=uniform:nan,1", []string{"X", "finite"}},
		{"X=uniform:a,1", []string{"X", `"a"`, "finite"}},
		{"X=uniform:1,0", []string{"X", "low <= high", "got low 1 > high 0", "swap"}},
		{"LearningRate=loguniform:0,1e-2", []string{`--param "LearningRate=loguniform:0,1e-2"`, "LearningRate", "loguniform needs 0 < low <= high (got low 0)"}},
		{"X=loguniform:-1,1", []string{"X", "0 < low", "got low -1"}},
		{"L=int:1.5,4", []string{"L", "integers", "1.5"}},
		{"L=int:1,1e300", []string{"L", "2^53"}},
		{"H=choice:", []string{"H", "empty"}},
		{"H=choice:a,,b", []string{"H", "value 2 is empty"}},
		{"H=choice:a,b,a", []string{"H", `"a"`, "twice"}},
	}
	for _, c := range cases {
		_, err := ParseParam(c.in)
		if err == nil {
			t.Errorf("ParseParam(%q) accepted it", c.in)
			continue
		}
		if !strings.HasPrefix(err.Error(), "--param ") {
			t.Errorf("ParseParam(%q): error %q does not name the flag's text", c.in, err)
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("ParseParam(%q): error %q lacks %q", c.in, err, w)
			}
		}
	}
}

func TestParamStringRoundTrip(t *testing.T) {
	for _, s := range []string{
		"LearningRate=loguniform:1e-4,1e-2",
		"LR=loguniform:3.0000000000000004e-05,0.1",
		"Dropout=uniform:0,0.5",
		"W=uniform:-1.25,1e10",
		"Tiny=uniform:5e-324,1e-300",
		"Layers=int:1,4",
		"Big=int:-9007199254740992,9007199254740992",
		"Hidden=choice:64,128,256",
		"Act=choice:relu,gelu,x=y,a:b",
	} {
		p := mustParse(t, s)
		q := mustParse(t, p.String())
		if !reflect.DeepEqual(p, q) {
			t.Errorf("%q: String %q parses to %+v, want %+v", s, p.String(), q, p)
		}
	}
	if got := mustParse(t, "LearningRate=loguniform:1e-4,1e-2").String(); got != "LearningRate=loguniform:0.0001,0.01" {
		t.Errorf("String = %q", got)
	}
	if got := mustParse(t, "Layers=int:1,4").String(); got != "Layers=int:1,4" {
		t.Errorf("String = %q", got)
	}
}

func TestSpaceCheck(t *testing.T) {
	good := Space{mustParse(t, "A=uniform:0,1"), mustParse(t, "B=choice:x,y")}
	if err := good.Check(); err != nil {
		t.Fatal(err)
	}
	if err := (Space{}).Check(); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Errorf("empty space: %v", err)
	}
	dup := Space{mustParse(t, "A=uniform:0,1"), mustParse(t, "A=int:0,1")}
	if err := dup.Check(); err == nil || !strings.Contains(err.Error(), "A is given twice") {
		t.Errorf("duplicate: %v", err)
	}
	for _, bad := range []Param{
		{Name: "X", Kind: Uniform, Low: 1, High: 0},
		{Name: "X", Kind: Uniform, Low: math.NaN(), High: 0},
		{Name: "X", Kind: LogUniform, Low: 0, High: 1},
		{Name: "X", Kind: Int, Low: 0.5, High: 1},
		{Name: "X", Kind: Choice},
		{Name: "X", Kind: Choice, Choices: []string{"a", "a"}},
		{Name: "X", Kind: Choice, Choices: []string{"a,b"}},
		{Name: "X", Kind: "normal", Low: 0, High: 1},
		{Name: "X", Kind: Uniform, High: 1, Choices: []string{"a"}},
		{Name: "", Kind: Uniform, High: 1},
		{Name: "X=Y", Kind: Uniform, High: 1},
	} {
		err := (Space{bad}).Check()
		if err == nil {
			t.Errorf("Check accepted %+v", bad)
			continue
		}
		if bad.Name != "" && !strings.Contains(err.Error(), bad.Name) {
			t.Errorf("Check(%+v): %q does not name it", bad, err)
		}
	}
}

func TestSpaceDiff(t *testing.T) {
	old := Space{
		mustParse(t, "LearningRate=loguniform:1e-4,1e-2"),
		mustParse(t, "Depth=int:1,4"),
		mustParse(t, "Act=choice:relu,gelu"),
	}
	if d := old.Diff(old); d != "" {
		t.Errorf("Diff with itself = %q", d)
	}
	same := Space{
		{Name: "LearningRate", Kind: LogUniform, Low: 1e-4, High: 1e-2},
		{Name: "Depth", Kind: Int, Low: 1, High: 4},
		{Name: "Act", Kind: Choice, Choices: []string{"relu", "gelu"}},
	}
	if d := old.Diff(same); d != "" {
		t.Errorf("Diff with an equal copy = %q", d)
	}
	now := Space{
		mustParse(t, "LearningRate=loguniform:1e-5,1e-2"),
		mustParse(t, "Act=choice:relu,gelu"),
		mustParse(t, "Hidden=choice:64,128"),
	}
	want := "LearningRate was loguniform:0.0001,0.01, now loguniform:1e-05,0.01; Hidden added; Depth removed"
	if d := old.Diff(now); d != want {
		t.Errorf("Diff = %q\nwant   %q", d, want)
	}
	reordered := Space{old[1], old[0], old[2]}
	if d := old.Diff(reordered); !strings.Contains(d, "order was LearningRate, Depth, Act, now Depth, LearningRate, Act") {
		t.Errorf("reorder Diff = %q", d)
	}
	kind := Space{old[0], mustParse(t, "Depth=uniform:1,4"), old[2]}
	if d := old.Diff(kind); d != "Depth was int:1,4, now uniform:1,4" {
		t.Errorf("kind change Diff = %q", d)
	}
	choices := Space{old[0], old[1], mustParse(t, "Act=choice:gelu,relu")}
	if d := old.Diff(choices); d != "Act was choice:relu,gelu, now choice:gelu,relu" {
		t.Errorf("choice order Diff = %q", d)
	}
}

func TestSets(t *testing.T) {
	s := Space{
		mustParse(t, "LearningRate=loguniform:1e-4,1e-2"),
		mustParse(t, "Layers=int:1,4"),
		mustParse(t, "Act=choice:relu,gelu"),
		mustParse(t, "Dropout=uniform:0,0.5"),
	}
	tenth := 0.1
	drop := tenth + 0.2 // 0.30000000000000004 at run time: not a short decimal
	got, err := s.Sets(map[string]float64{"LearningRate": 1e-3, "Layers": 3, "Act": 1, "Dropout": drop})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"LearningRate=0.001", "Layers=3", "Act=gelu", "Dropout=0.30000000000000004"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Sets = %q, want %q", got, want)
	}

	bad := []struct {
		params map[string]float64
		want   string
	}{
		{map[string]float64{"LearningRate": 1e-3, "Layers": 3, "Act": 1}, "Dropout has no value"},
		{map[string]float64{"LearningRate": 1e-1, "Layers": 3, "Act": 1, "Dropout": 0}, "LearningRate=0.1 is outside loguniform:0.0001,0.01"},
		{map[string]float64{"LearningRate": 1e-3, "Layers": 5, "Act": 1, "Dropout": 0}, "Layers=5 is outside int:1,4"},
		{map[string]float64{"LearningRate": 1e-3, "Layers": 2.5, "Act": 1, "Dropout": 0}, "Layers=2.5 is not an integer"},
		{map[string]float64{"LearningRate": 1e-3, "Layers": 2, "Act": 2, "Dropout": 0}, "Act: choice index 2 is not one of 0..1"},
		{map[string]float64{"LearningRate": 1e-3, "Layers": 2, "Act": -1, "Dropout": 0}, "Act: choice index -1"},
		{map[string]float64{"LearningRate": 1e-3, "Layers": 2, "Act": 0.5, "Dropout": 0}, "Act: choice index 0.5"},
		{map[string]float64{"LearningRate": 1e-3, "Layers": 2, "Act": 0, "Dropout": math.NaN()}, "Dropout=NaN is not a finite number"},
		{map[string]float64{"LearningRate": 1e-3, "Layers": 2, "Act": 0, "Dropout": 0, "Zeta": 1, "Beta": 2}, "Beta, Zeta not in the search space"},
	}
	for _, b := range bad {
		if _, err := s.Sets(b.params); err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("Sets(%v) = %v, want an error with %q", b.params, err, b.want)
		}
		if err := s.Contains(b.params); err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("Contains(%v) = %v, want an error with %q", b.params, err, b.want)
		}
	}
}

// FuzzParseParam: whatever parses prints back to itself, and nothing panics. The seeds run as an
// ordinary test.
func FuzzParseParam(f *testing.F) {
	for _, s := range []string{
		"LearningRate=loguniform:1e-4,1e-2", "Dropout=uniform:0,0.5", "Layers=int:1,4",
		"Act=choice:relu,gelu", "X=uniform:1e308,1.7976931348623157e308", "=", "a=b:c", "X=int:-0,0",
		"X=choice: , ", "X=uniform:0x1p-3,1",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParseParam(s)
		if err != nil {
			return
		}
		if err := (Space{p}).Check(); err != nil {
			t.Fatalf("%q parsed to %+v, which Check refuses: %v", s, p, err)
		}
		q, err := ParseParam(p.String())
		if err != nil {
			t.Fatalf("%q: String %q does not parse: %v", s, p.String(), err)
		}
		if !p.equal(q) || p.String() != q.String() {
			t.Fatalf("%q: String %q parses to %+v, want %+v", s, p.String(), q, p)
		}
	})
}
