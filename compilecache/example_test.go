package compilecache_test

import (
	"fmt"
	"strings"

	"github.com/nitro-go/nitro/compilecache"
)

func exampleKey(accum int) compilecache.Key {
	return compilecache.Key{
		Kind:           compilecache.KindGradient,
		Experiment:     "mnist.MLP",
		GraphConstHash: "3f2a",
		GraphConst:     [][2]string{{"width", "128"}},
		Hook:           "mnist.MLP.Loss",
		Inputs:         []compilecache.Input{{Name: "img", DType: "float32", Shape: []int{128, 784}}},
		DeviceCount:    1,
		Accum:          accum,
	}
}

func compileProgram() (any, error) { return "compiled program", nil }

func ExampleNew() {
	c := compilecache.New()
	fmt.Printf("%+v\n", c.Stats())
	// Output: {Hits:0 Misses:0 Entries:0}
}

func ExampleDefault() {
	// Every Nitro in the process shares this one cache.
	fmt.Println(compilecache.Default() == compilecache.Default())
	// Output: true
}

func ExampleCache_Get() {
	c := compilecache.New()
	prog, lookup, err := c.Get(exampleKey(1), compileProgram)
	fmt.Println(prog, lookup.Hit, err)
	_, lookup, _ = c.Get(exampleKey(1), compileProgram)
	fmt.Println("second call hit:", lookup.Hit)
	// Output:
	// compiled program false <nil>
	// second call hit: true
}

func ExampleCache_Get_why() {
	c := compilecache.New()
	c.Get(exampleKey(1), compileProgram)
	wider := exampleKey(1)
	wider.GraphConstHash = "91bc"
	wider.GraphConst = [][2]string{{"width", "256"}}
	_, lookup, _ := c.Get(wider, compileProgram)
	fmt.Println(lookup.Hit, lookup.Why)
	// Output: false graphconst field width: 128 -> 256
}

func ExampleCache_Get_invalidKey() {
	key := exampleKey(1)
	key.Kind = "eval" // accum belongs to the gradient program only
	_, _, err := compilecache.New().Get(key, compileProgram)
	fmt.Println(err)
	// Output: compile cache key for eval program: Accum 1 set: accum belongs to the gradient program's key only (leave it 0 so changing accum does not recompile this program)
}

func ExampleCache_Stats() {
	c := compilecache.New()
	for step := 0; step < 3; step++ {
		c.Get(exampleKey(1), compileProgram)
	}
	st := c.Stats()
	fmt.Printf("%+v healthy=%v\n", st, st.Misses == st.Entries)
	// Output: {Hits:2 Misses:1 Entries:1} healthy=true
}

func ExampleCache_Reset() {
	c := compilecache.New()
	c.Get(exampleKey(1), compileProgram)
	c.Reset()
	fmt.Printf("%+v\n", c.Stats())
	// Output: {Hits:0 Misses:0 Entries:0}
}

func ExampleCache_Evict() {
	c := compilecache.New()
	c.Get(exampleKey(1), compileProgram)
	fmt.Println(c.Evict(exampleKey(1)))
	c.Get(exampleKey(1), compileProgram)
	fmt.Printf("%+v\n", c.Stats()) // compiled twice: misses > entries
	// Output:
	// true
	// {Hits:0 Misses:2 Entries:1}
}

func ExampleCache_Explanations() {
	c := compilecache.New()
	c.Get(exampleKey(1), compileProgram)
	c.Get(exampleKey(2), compileProgram)
	for _, line := range c.Explanations() {
		fmt.Println(line)
	}
	// Output: gradient program of mnist.MLP recompiled: accum: 1 -> 2
}

func ExampleBuildIdentity() {
	id := compilecache.BuildIdentity()
	fmt.Println(strings.Contains(id, "exe=sha256:"))
	// Output: true
}

func ExampleKindMetric() {
	key := exampleKey(0)
	key.Kind = compilecache.KindMetric("Accuracy") // one program per device-residency metric hook
	fmt.Println(key.Kind)
	// Output: metric:Accuracy
}
