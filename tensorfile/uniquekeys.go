package tensorfile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// MaxJSONDepth bounds the nesting of the JSON nitro reads from disk (a bundle's or a run dir's
// manifest.json, a checkpoint's record, a metrics.jsonl line): each nests a few levels, and a
// file nested deeper is hostile or broken, refused before anything parses it.
const MaxJSONDepth = 64

// ErrTooDeep is what CheckDepth's error wraps (errors.Is).
var ErrTooDeep = errors.New("JSON nested too deeply")

// CheckDepth refuses JSON whose objects and arrays nest more than limit levels, in one pass over
// the bytes that allocates nothing, so that a hostile file (200k levels in 400 kB) costs a
// read of its bytes, not a parser's time. Brackets inside strings do not count. It checks only
// the nesting: malformed JSON is the decoder's to report, and an unbalanced file is not refused
// here unless it opens more than limit levels.
func CheckDepth(data []byte, limit int) error {
	depth, inString, escaped := 0, false, false
	for i, c := range data {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			if depth++; depth > limit {
				return fmt.Errorf("%w: more than %d levels (at byte %d); refused before parsing", ErrTooDeep, limit, i)
			}
		case c == '}' || c == ']':
			depth = max(depth-1, 0)
		}
	}
	return nil
}

// CheckUniqueKeys refuses JSON in which an object holds one key twice, naming the key and where
// it sits (manifest.checkpoints[2].file). encoding/json lets the last one win, so a manifest
// edited by hand or by a hostile tool could say two things and be read as one of them. It first
// refuses nesting past MaxJSONDepth (CheckDepth, wrapping ErrTooDeep), so its work is one pass
// over the bytes and one walk of the tokens; the path is spelled out only for the error. It
// checks only keys: syntax errors are the decoder's to report, and this returns nil for them.
func CheckUniqueKeys(data []byte) error {
	if err := CheckDepth(data, MaxJSONDepth); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var path []pathStep
	if err := walkValue(dec, &path); err != errMalformed {
		return err
	}
	return nil
}

// errMalformed stops the walk at the first token the decoder cannot read: its More keeps
// answering true after an error, so going on would never end.
var errMalformed = errors.New("malformed JSON")

// pathStep is one step of the path to a value: an object's key, or an array's index when key
// is unset.
type pathStep struct {
	key   *string
	index int
}

// spell writes path as $.checkpoints[2].file.
func spell(path []pathStep) string {
	var b strings.Builder
	b.WriteString("$")
	for _, s := range path {
		if s.key != nil {
			b.WriteString("." + *s.key)
		} else {
			b.WriteString("[" + strconv.Itoa(s.index) + "]")
		}
	}
	return b.String()
}

// walkValue reads one value from dec; *path leads to it, for the error.
func walkValue(dec *json.Decoder, path *[]pathStep) error {
	tok, err := dec.Token()
	if err != nil {
		return errMalformed // io.EOF or bad syntax: not this check's to report
	}
	switch tok {
	case json.Delim('{'):
		seen := map[string]bool{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return errMalformed
			}
			key, _ := kt.(string)
			if seen[key] {
				return fmt.Errorf("duplicate key %s in %s: a key may appear once in an object", strconv.Quote(key), spell(*path))
			}
			seen[key] = true
			*path = append(*path, pathStep{key: &key})
			if err := walkValue(dec, path); err != nil {
				return err
			}
			*path = (*path)[:len(*path)-1]
		}
		if _, err := dec.Token(); err != nil { // '}'
			return errMalformed
		}
	case json.Delim('['):
		for i := 0; dec.More(); i++ {
			*path = append(*path, pathStep{index: i})
			if err := walkValue(dec, path); err != nil {
				return err
			}
			*path = (*path)[:len(*path)-1]
		}
		if _, err := dec.Token(); err != nil { // ']'
			return errMalformed
		}
	}
	return nil
}
