package generate_test

import (
	"fmt"

	"github.com/nitro-go/nitro/generate"
)

// Options.Check names each bad option by its field and flag.
func ExampleOptions_Check() {
	fmt.Println(generate.Options{Tokens: 0, Temperature: 1}.Check())
	fmt.Println(generate.Options{Tokens: 5, TopK: 1}.Check()) // greedy: no temperature needed
	// Output:
	// Tokens (--tokens) = 0: want at least 1 token to generate
	// <nil>
}

// A Sampler with TopK 1 takes the most likely token; with a seed, it draws the same tokens each
// time.
func ExampleSampler_Next() {
	greedy, _ := generate.NewSampler(generate.Options{Tokens: 1, TopK: 1})
	t, _ := greedy.Next([]float32{0.1, 2.5, -1, 2.5})
	fmt.Println("greedy:", t) // the first of the two largest

	draw := func() []int {
		s, _ := generate.NewSampler(generate.Options{Tokens: 1, Temperature: 1, Seed: 7})
		var out []int
		for range 5 {
			t, _ := s.Next([]float32{1, 1, 1, 1})
			out = append(out, t)
		}
		return out
	}
	a, b := draw(), draw()
	fmt.Println("same seed, same draws:", fmt.Sprint(a) == fmt.Sprint(b))
	// Output:
	// greedy: 1
	// same seed, same draws: true
}

// NewSampler refuses options Check refuses.
func ExampleNewSampler() {
	_, err := generate.NewSampler(generate.Options{Tokens: 3, Temperature: 0, TopK: 40})
	fmt.Println(err)
	// Output: Temperature (--temperature) = 0: want a finite number > 0, or TopK 1 (--top-k 1) for greedy decoding
}

// Generate continues a prompt; the Fake model counts up, and with a window of 4 positions it is
// reset and re-fed whenever the window fills.
func ExampleGenerate() {
	m := &generate.Fake{Ctx: 4, Vocab: 10}
	out, err := generate.Generate(m, []int{1, 2}, generate.Options{Tokens: 6, TopK: 1})
	fmt.Println(out, err, "resets:", m.Resets)
	// Output: [3 4 5 6 7 8] <nil> resets: 2
}
