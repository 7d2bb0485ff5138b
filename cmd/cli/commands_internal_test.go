package cli

import (
	"io"
	"os"
	"strings"
	"testing"
)

// TestCommandsTable: each entry's name is the name its builder gives the command, so the help's
// order (which ranks by name) follows the table.
func TestCommandsTable(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range commands {
		if got := c.build(io.Discard, io.Discard).Name(); got != c.name {
			t.Errorf("commands entry %q builds a command named %q: make the entry's name the command's", c.name, got)
		}
		if seen[c.name] {
			t.Errorf("commands lists %q twice", c.name)
		}
		seen[c.name] = true
	}
}

// TestCommandDocsNameEveryCommand: cmd/doc.go describes the commands by hand, so it must name each
// one the table has, in backquotes (it once missed render, board and new).
func TestCommandDocsNameEveryCommand(t *testing.T) {
	doc, err := os.ReadFile("../doc.go")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.ReplaceAll(string(doc), "\n//", "") // a name may wrap
	for _, c := range commands {
		if !strings.Contains(text, "`"+c.name+"`") && !strings.Contains(text, "`"+c.name+" ") {
			t.Errorf("cmd/doc.go does not name the %q command: add it, in backquotes, to the cmd/nitro paragraph", c.name)
		}
	}
}
