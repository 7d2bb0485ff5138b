package sweep

import (
	"math"
	"reflect"
	"strings"
	"testing"
)

func testSpace(t *testing.T) Space {
	t.Helper()
	return Space{
		mustParse(t, "LearningRate=loguniform:1e-4,1e-2"),
		mustParse(t, "Dropout=uniform:0,0.5"),
		mustParse(t, "Layers=int:1,4"),
		mustParse(t, "Act=choice:relu,gelu,silu"),
	}
}

func TestRandomInSpaceAndSpread(t *testing.T) {
	s := testSpace(t)
	r := NewRandom(7)
	counts := map[float64]int{}
	layers := map[float64]int{}
	var lowLR, lowDrop int
	const n = 3000
	for i := range n {
		v, err := r.Sample(s, nil, i)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Contains(v); err != nil {
			t.Fatalf("trial %d: %v", i, err)
		}
		counts[v["Act"]]++
		layers[v["Layers"]]++
		if v["LearningRate"] < 1e-3 { // the log-midpoint: half the draws
			lowLR++
		}
		if v["Dropout"] < 0.25 {
			lowDrop++
		}
	}
	for k := range 3 {
		if c := counts[float64(k)]; c < n/3-150 || c > n/3+150 {
			t.Errorf("Act index %d drawn %d times of %d", k, c, n)
		}
	}
	for k := 1; k <= 4; k++ {
		if c := layers[float64(k)]; c < n/4-150 || c > n/4+150 {
			t.Errorf("Layers=%d drawn %d times of %d", k, c, n)
		}
	}
	if lowLR < n/2-150 || lowLR > n/2+150 {
		t.Errorf("LearningRate below 1e-3 %d times of %d: not uniform in log", lowLR, n)
	}
	if lowDrop < n/2-150 || lowDrop > n/2+150 {
		t.Errorf("Dropout below 0.25 %d times of %d", lowDrop, n)
	}
}

func TestRandomIsPureInSeedNumberName(t *testing.T) {
	s := testSpace(t)
	a, b := NewRandom(3), NewRandom(3)
	// Asked in another order and with history: same values.
	forward := map[int]map[string]float64{}
	for i := range 20 {
		v, _ := a.Sample(s, nil, i)
		forward[i] = v
	}
	hist := []Trial{{Number: 0, State: Complete, HasValue: true, Value: 1, Params: forward[0]}}
	for i := 19; i >= 0; i-- {
		v, _ := b.Sample(s, hist, i)
		if !reflect.DeepEqual(v, forward[i]) {
			t.Fatalf("trial %d: %v asked backwards, %v forwards", i, v, forward[i])
		}
	}
	// Another field added, or the order changed: the others keep their values.
	more := append(Space{mustParse(t, "Extra=uniform:0,1")}, s[3], s[2], s[1], s[0])
	for i := range 20 {
		v, err := a.Sample(more, nil, i)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range s {
			if v[p.Name] != forward[i][p.Name] {
				t.Fatalf("trial %d: %s=%v with a field added, %v without", i, p.Name, v[p.Name], forward[i][p.Name])
			}
		}
	}
	// Another seed or number: other values.
	other, _ := NewRandom(4).Sample(s, nil, 0)
	if other["Dropout"] == forward[0]["Dropout"] {
		t.Error("seeds 3 and 4 gave trial 0 the same Dropout")
	}
	if forward[0]["Dropout"] == forward[1]["Dropout"] {
		t.Error("trials 0 and 1 got the same Dropout")
	}
}

func TestRandomRefuses(t *testing.T) {
	if _, err := NewRandom(1).Sample(Space{{Name: "X", Kind: Uniform, Low: 1, High: 0}}, nil, 0); err == nil {
		t.Error("accepted an invalid space")
	}
	if _, err := NewRandom(1).Sample(testSpace(t), nil, -1); err == nil {
		t.Error("accepted a negative trial number")
	}
}

func TestRandomDegenerateRanges(t *testing.T) {
	s := Space{
		mustParse(t, "U=uniform:0.3,0.3"),
		mustParse(t, "L=loguniform:0.3,0.3"),
		mustParse(t, "I=int:2,2"),
		mustParse(t, "C=choice:only"),
	}
	for i := range 10 {
		v, err := NewRandom(1).Sample(s, nil, i)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]float64{"U": 0.3, "L": 0.3, "I": 2, "C": 0}
		if !reflect.DeepEqual(v, want) {
			t.Fatalf("trial %d: %v, want %v", i, v, want)
		}
	}
}

func TestGrid(t *testing.T) {
	s := Space{
		mustParse(t, "Act=choice:relu,gelu"),
		mustParse(t, "Layers=int:1,3"),
	}
	n, err := GridSize(s)
	if err != nil || n != 6 {
		t.Fatalf("GridSize = %d, %v; want 6", n, err)
	}
	g, err := NewGrid(s)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for i := range 8 {
		v, err := g.Sample(s, nil, i)
		if err != nil {
			t.Fatal(err)
		}
		sets, err := s.Sets(v)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, strings.Join(sets, " "))
	}
	want := []string{
		"Act=relu Layers=1", "Act=relu Layers=2", "Act=relu Layers=3",
		"Act=gelu Layers=1", "Act=gelu Layers=2", "Act=gelu Layers=3",
		"Act=relu Layers=1", "Act=relu Layers=2", // wraps around
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("grid order:\n got %q\nwant %q", got, want)
	}
	if _, err := g.Sample(Space{s[1], s[0]}, nil, 0); err == nil || !strings.Contains(err.Error(), "order") {
		t.Errorf("grid asked for another space: %v", err)
	}
	if _, err := g.Sample(s, nil, -1); err == nil {
		t.Error("grid accepted a negative trial number")
	}
}

func TestGridRefuses(t *testing.T) {
	_, err := NewGrid(Space{mustParse(t, "Act=choice:relu,gelu"), mustParse(t, "LearningRate=loguniform:1e-4,1e-2")})
	if err == nil {
		t.Fatal("grid accepted a loguniform param")
	}
	for _, w := range []string{"LearningRate", "choice:", "LearningRate=choice:0.0001,0.001,0.01"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q lacks %q", err, w)
		}
	}
	if _, err := GridSize(Space{mustParse(t, "D=uniform:0,0.5")}); err == nil || !strings.Contains(err.Error(), "D=choice:0,0.25,0.5") {
		t.Errorf("uniform: %v", err)
	}
	if _, err := GridSize(Space{mustParse(t, "N=int:0,9000000000")}); err == nil || !strings.Contains(err.Error(), "N") {
		t.Errorf("huge int range: %v", err)
	}
	big := Space{}
	for _, name := range []string{"A", "B", "C", "D"} {
		big = append(big, mustParse(t, name+"=int:1,1000"))
	}
	if _, err := GridSize(big); err == nil || !strings.Contains(err.Error(), "combinations") {
		t.Errorf("huge product: %v", err)
	}
}

func TestClampKeepsLogUniformInRange(t *testing.T) {
	// Ranges whose exp(log(x)) rounds off an end.
	p := mustParse(t, "X=loguniform:0.1,0.30000000000000004")
	for i := range 2000 {
		v := randomValue(int64(i), i, p)
		if v < p.Low || v > p.High || math.IsNaN(v) {
			t.Fatalf("draw %d: %v outside [%v, %v]", i, v, p.Low, p.High)
		}
	}
}
