package sweep_test

import (
	"fmt"
	"math"

	"github.com/nitro-go/nitro/sweep"
)

func ExampleParseParam() {
	for _, s := range []string{
		"LearningRate=loguniform:1e-4,1e-2",
		"Act=choice:relu,gelu",
		"LearningRate=loguniform:0,1e-2",
	} {
		p, err := sweep.ParseParam(s)
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Printf("%s %s [%v, %v] %q -> %s\n", p.Name, p.Kind, p.Low, p.High, p.Choices, p)
	}
	// Output:
	// LearningRate loguniform [0.0001, 0.01] [] -> LearningRate=loguniform:0.0001,0.01
	// Act choice [0, 0] ["relu" "gelu"] -> Act=choice:relu,gelu
	// --param "LearningRate=loguniform:0,1e-2": LearningRate: loguniform needs 0 < low <= high (got low 0): use a positive low, or uniform: for a range that includes 0
}

func ExampleNewRandom() {
	var space sweep.Space
	for _, s := range []string{"LearningRate=loguniform:1e-4,1e-2", "Layers=int:1,4", "Act=choice:relu,gelu"} {
		p, _ := sweep.ParseParam(s)
		space = append(space, p)
	}
	r := sweep.NewRandom(42)
	// Trial 1's values do not depend on trial 0 having been asked for, nor on the history.
	a, _ := r.Sample(space, nil, 1)
	b, _ := sweep.NewRandom(42).Sample(space, []sweep.Trial{{Number: 0, State: sweep.Complete}}, 1)
	sets, _ := space.Sets(a) // the --set form the Objective passes on
	fmt.Println(sets)
	fmt.Println(a["LearningRate"] == b["LearningRate"] && a["Layers"] == b["Layers"] && a["Act"] == b["Act"])
	// Output:
	// [LearningRate=0.0002925827205486173 Layers=3 Act=gelu]
	// true
}

func ExampleNewTPE() {
	p, _ := sweep.ParseParam("X=uniform:0,1")
	space := sweep.Space{p}
	s := sweep.NewTPE(1, sweep.TPEOptions{}) // minimize; 10 random trials, then TPE
	var history []sweep.Trial
	best := math.Inf(1)
	for n := range 50 {
		params, err := s.Sample(space, history, n)
		if err != nil {
			fmt.Println(err)
			return
		}
		v := (params["X"] - 0.3) * (params["X"] - 0.3)
		best = math.Min(best, v)
		history = append(history, sweep.Trial{Number: n, Params: params, State: sweep.Complete, Value: v, HasValue: true})
	}
	fmt.Println("best within 0.02 of 0.3:", math.Sqrt(best) < 0.02)
	// Output:
	// best within 0.02 of 0.3: true
}

func ExampleASHA() {
	a := sweep.ASHA{} // rungs at steps 1, 3, 9, 27, ...; a third goes on
	fmt.Println(a.Rungs(30))
	history := []sweep.Trial{
		{Number: 0, State: sweep.Complete, Intermediate: map[int]float64{1: 0.9, 2: 0.7, 3: 0.5}},
		{Number: 1, State: sweep.Pruned, Intermediate: map[int]float64{1: 1.2}},
		{Number: 2, State: sweep.Running, Intermediate: map[int]float64{1: 0.8, 2: 0.75}},
	}
	// Trial 2 at step 3 (a rung) against 0.5 there: pruned when minimizing.
	fmt.Println(a.Prune(history, 2, 3, 0.6, false))
	// Between rungs nothing is pruned.
	fmt.Println(a.Prune(history, 2, 2, 5, false))
	// A new trial at rung 1 with 0.85: n = 4, one goes on, and 0.8 is better.
	fmt.Println(a.Prune(history, 3, 1, 0.85, false))
	// Output:
	// [1 3 9 27]
	// true
	// false
	// true
}
