package tensorfile

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
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

// TestCheckUniqueKeysDeep: JSON nested past MaxJSONDepth is refused by one pass over the bytes,
// before the walk: 200k levels (400 kB) took over a minute when the walk built a path string at
// each level. A long key above a long array costs one pass too (the path is built only for the
// error), and nesting inside a string does not count.
func TestCheckUniqueKeysDeep(t *testing.T) {
	deep := map[string][]byte{
		"objects": []byte(strings.Repeat(`{"a":`, 200_000) + "1" + strings.Repeat("}", 200_000)),
		"arrays":  []byte(strings.Repeat("[", 200_000) + strings.Repeat("]", 200_000)),
	}
	for name, data := range deep {
		start := time.Now()
		err := CheckUniqueKeys(data)
		if d := time.Since(start); d > time.Second {
			t.Errorf("%s: %v to refuse %d bytes, want well under a second", name, d, len(data))
		}
		if !errors.Is(err, ErrTooDeep) || !strings.Contains(err.Error(), fmt.Sprint(MaxJSONDepth)) {
			t.Errorf("%s: err = %v, want ErrTooDeep naming the limit %d", name, err, MaxJSONDepth)
		}
	}
	at := strings.Repeat("[", MaxJSONDepth) + strings.Repeat("]", MaxJSONDepth)
	if err := CheckDepth([]byte(at), MaxJSONDepth); err != nil {
		t.Errorf("%d levels, the limit: %v", MaxJSONDepth, err)
	}
	if err := CheckDepth([]byte("["+at+"]"), MaxJSONDepth); !errors.Is(err, ErrTooDeep) || !strings.Contains(err.Error(), "at byte 64") {
		t.Errorf("%d levels: err = %v, want ErrTooDeep at byte 64", MaxJSONDepth+1, err)
	}
	if err := CheckDepth([]byte(`{"k":"[[[[\"{{{{"}`), 1); err != nil {
		t.Errorf("brackets inside a string counted: %v", err)
	}
	// Copying the key's path for each value took 1.8 s for 3000 values; 50k take a pass of tokens.
	wide := []byte(`{"` + strings.Repeat("k", 1<<20) + `":[` + strings.Repeat("1,", 50_000) + `1]}`)
	start := time.Now()
	if err := CheckUniqueKeys(wide); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("a 1 MiB key above 50k values: %v, want about a linear pass", d)
	}
}
