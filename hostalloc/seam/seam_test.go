package seam

import (
	"errors"
	"strings"
	"testing"
)

// With nothing registered the program keeps its allocator, the line says so (with an LD_PRELOAD
// named), and a choice of hostalloc's policy is refused naming the opt-in; registered, the
// allocator's own answers are returned.
func TestSeam(t *testing.T) {
	t.Setenv(Env, "")
	t.Setenv("LD_PRELOAD", "")
	if line, err := Policy(); line != NotLinked || err != nil || Linked() {
		t.Fatalf("not linked: Policy = %q, %v (Linked %v), want %q", line, err, Linked(), NotLinked)
	}
	t.Setenv("LD_PRELOAD", "/usr/lib/libjemalloc.so.2")
	if line, _ := Apply(); line != NotLinked+"; LD_PRELOAD=/usr/lib/libjemalloc.so.2" {
		t.Errorf("not linked, preloaded: Apply = %q", line)
	}
	t.Setenv(Env, "system")
	if _, err := Policy(); err != nil {
		t.Errorf("%s=system, not linked: %v (the program's own allocator is the system's)", Env, err)
	}
	t.Setenv(Env, "blocks")
	if _, err := Policy(); err == nil || !strings.Contains(err.Error(), `import _ "github.com/nitro-go/nitro/hostalloc"`) {
		t.Errorf("%s=blocks, not linked: %v, want a refusal naming the opt-in", Env, err)
	}
	refused := errors.New("refused")
	Register(Allocator{Policy: func() (string, error) { return "p", nil }, Apply: func() (string, error) { return "", refused }})
	defer func() { registered = nil }()
	if line, err := Policy(); line != "p" || err != nil || !Linked() {
		t.Errorf("registered: Policy = %q, %v", line, err)
	}
	if _, err := Apply(); err != refused {
		t.Errorf("registered: Apply's error = %v, want the allocator's", err)
	}
	defer func() {
		if recover() == nil {
			t.Error("a second Register did not panic")
		}
	}()
	Register(Allocator{})
}
