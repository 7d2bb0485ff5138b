package pjrthook

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// plainMain is a one-device program as GoMLX writes it: named arguments, no attributes.
const plainMain = `module @nitro_train_step {
  func.func @main(%params_0: tensor<4xf32>, %x: tensor<2x4xf32>, %state: tensor<3xui64>) -> (tensor<f32>, tensor<4xf32>, tensor<3xui64>) {
    "stablehlo.return"(%a, %b, %state) : (tensor<f32>, tensor<4xf32>, tensor<3xui64>) -> ()
  }
}
`

func TestAddAliasesPlain(t *testing.T) {
	out, err := addAliases([]byte(plainMain), []Alias{{Input: 2, Output: 2}, {Input: 0, Output: 1}})
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Replace(plainMain,
		"(%params_0: tensor<4xf32>, %x: tensor<2x4xf32>, %state: tensor<3xui64>)",
		"(%params_0: tensor<4xf32> {tf.aliasing_output = 1 : i32}, %x: tensor<2x4xf32>, %state: tensor<3xui64> {tf.aliasing_output = 2 : i32})", 1)
	if string(out) != want {
		t.Fatalf("got\n%s\nwant\n%s", out, want)
	}
}

// TestAddAliasesSharded rewrites a two-device program whose arguments and results carry
// shardings, against a golden file: the alias goes first in each argument's dictionary.
func TestAddAliasesSharded(t *testing.T) {
	in, err := os.ReadFile("testdata/alias_in.mlir")
	if err != nil {
		t.Fatal(err)
	}
	out, err := addAliases(in, []Alias{{Input: 0, Output: 0}, {Input: 2, Output: 1}})
	if err != nil {
		t.Fatal(err)
	}
	golden := "testdata/alias_out.mlir"
	if os.Getenv("NITRO_UPDATE_GOLDEN") != "" {
		if err := os.WriteFile(golden, out, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out, want) {
		t.Fatalf("got\n%s\nwant\n%s", out, want)
	}
	// A batch-sharded argument never aliases a replicated result, though their types agree.
	if _, err := addAliases(in, []Alias{{Input: 3, Output: 2}}); err == nil || !strings.Contains(err.Error(), "sharding") {
		t.Fatalf("batch (sharded) -> replicated result: err %v, want a sharding mismatch", err)
	}
}

func TestAddAliasesRefuses(t *testing.T) {
	cases := []struct {
		name  string
		code  string
		pairs []Alias
		want  string
	}{
		{"types differ", plainMain, []Alias{{Input: 1, Output: 1}}, "differ"},
		{"input out of range", plainMain, []Alias{{Input: 3, Output: 1}}, "3 arguments"},
		{"output out of range", plainMain, []Alias{{Input: 0, Output: 3}}, "3 results"},
		{"negative", plainMain, []Alias{{Input: -1, Output: 0}}, "arguments"},
		{"output twice", plainMain, []Alias{{Input: 0, Output: 1}, {Input: 0, Output: 1}}, "twice"},
		{"already aliased", strings.Replace(plainMain, "%params_0: tensor<4xf32>", "%params_0: tensor<4xf32> {tf.aliasing_output = 1 : i32}", 1),
			[]Alias{{Input: 0, Output: 1}}, "already"},
		{"no main", "module @m {\n}\n", []Alias{{Input: 0, Output: 0}}, "no "},
		{"one result, no parentheses", strings.Replace(plainMain, "-> (tensor<f32>, tensor<4xf32>, tensor<3xui64>)", "-> tensor<f32>", 1),
			[]Alias{{Input: 0, Output: 0}}, "parenthesized"},
		{"unbalanced", strings.Replace(plainMain, "tensor<2x4xf32>", "tensor<2x4xf32", 1), []Alias{{Input: 0, Output: 1}}, "parse"},
		{"tuple type", strings.Replace(plainMain, "%x: tensor<2x4xf32>", "%x: tuple<tensor<2xf32>>", 1), []Alias{{Input: 0, Output: 1}}, "tensor type"},
	}
	for _, c := range cases {
		out, err := addAliases([]byte(c.code), c.pairs)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v (out %q), want one containing %q", c.name, err, out, c.want)
		}
	}
}

// TestAliasForSaysOnce: a declared module whose pairs do not fit compiles unchanged, said once.
func TestAliasForSaysOnce(t *testing.T) {
	var said []string
	aliasNotice = func(s string) { said = append(said, s) }
	defer func() { aliasNotice = nil }()
	code := strings.Replace(plainMain, "nitro_train_step", "nitro_alias_test_once", 1)
	DeclareAliases("nitro_alias_test_once", []Alias{{Input: 1, Output: 1}})
	defer DeclareAliases("nitro_alias_test_once", nil)
	for range 3 {
		if out := aliasFor([]byte(code)); out != nil {
			t.Fatalf("a type mismatch was rewritten:\n%s", out)
		}
	}
	if len(said) != 1 || !strings.Contains(said[0], "nitro_alias_test_once") {
		t.Fatalf("said %q, want one notice naming the module", said)
	}
	if a := LastAliasing(); a.Module != "nitro_alias_test_once" || a.Pairs != 0 || a.Err == nil {
		t.Fatalf("LastAliasing = %+v, want the refusal", a)
	}
	DeclareAliases("nitro_alias_test_once", []Alias{{Input: 0, Output: 1}})
	if out := aliasFor([]byte(code)); !bytes.Contains(out, []byte("{tf.aliasing_output = 1 : i32}")) {
		t.Fatalf("the redeclared pair was not applied:\n%s", out)
	}
	if out := aliasFor([]byte(strings.Replace(code, "nitro_alias_test_once", "nitro_undeclared", 1))); out != nil {
		t.Fatal("an undeclared module was rewritten")
	}
}

// FuzzAddAliases: any text and pairs give a rewrite or an error, never a panic, and a rewrite
// only ever adds text.
func FuzzAddAliases(f *testing.F) {
	in, _ := os.ReadFile("testdata/alias_in.mlir")
	f.Add(in, 0, 0)
	f.Add([]byte(plainMain), 2, 2)
	f.Fuzz(func(t *testing.T, code []byte, input, output int) {
		out, err := addAliases(code, []Alias{{Input: input, Output: output}})
		if err == nil && len(out) <= len(code) {
			t.Fatalf("a rewrite that added nothing")
		}
	})
}
