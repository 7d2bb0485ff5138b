package tensorfile

import (
	"strings"
	"testing"
)

// A key twice in one object is refused wherever it sits, naming it and its path; the same key in
// two objects, and malformed JSON (the decoder's to report), are not this check's concern.
func TestCheckUniqueKeys(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"a":1,"a":2}`, `duplicate key "a" in $`},
		{`{"weights_file":"w","x":{"y":1},"weights_file":"v"}`, `duplicate key "weights_file" in $`},
		{`{"checkpoints":[{"file":"a"},{"file":"b","file":"c"}]}`, `duplicate key "file" in $.checkpoints[1]`},
		{`[[{"k":{"k":1,"k":2}}]]`, `duplicate key "k" in $[0][0].k`},
	} {
		err := CheckUniqueKeys([]byte(c.in))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want %q", c.in, err, c.want)
		}
	}
	for _, ok := range []string{`{"a":{"k":1},"b":{"k":1}}`, `[{"a":1},{"a":1}]`, `{"a":`, `not json`, ``, `{"a":1} {"a":2}`, `[x`, `{"a":[x`, `[1,`, `{"a" 1}`} { // the malformed ones used to loop forever
		if err := CheckUniqueKeys([]byte(ok)); err != nil {
			t.Errorf("%s: %v, want nil", ok, err)
		}
	}
}
