package tensorfile

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxNameLen is the longest name CheckName accepts, in bytes.
const MaxNameLen = 256

// CheckName applies the workspace's rule for a name that ends up in a file (a tensor, a weight,
// a batch field, a bundle, a provenance key): not empty, at most MaxNameLen bytes of UTF-8, no
// control character. Names become JSON keys and appear in error messages, where a control
// character would garble what a reader sees. what names the name in the error
// ("ExportSpec.Name", "inputs[0].name").
func CheckName(what, name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%s is empty", what)
	case len(name) > MaxNameLen:
		return fmt.Errorf("%s is %d bytes long (at most %d)", what, len(name), MaxNameLen)
	case !utf8.ValidString(name):
		return fmt.Errorf("%s %q is not UTF-8", what, name)
	case strings.ContainsFunc(name, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return fmt.Errorf("%s %q holds a control character", what, name)
	}
	return nil
}
