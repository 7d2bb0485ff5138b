package tensorfile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// CheckUniqueKeys refuses JSON in which an object holds one key twice, naming the key and where
// it sits (manifest.checkpoints[2].file). encoding/json lets the last one win, so a manifest
// edited by hand or by a hostile tool could say two things and be read as one of them. It checks
// only keys: syntax errors are the decoder's to report, and this returns nil for them.
func CheckUniqueKeys(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := walkValue(dec, "$"); err != errMalformed {
		return err
	}
	return nil
}

// errMalformed stops the walk at the first token the decoder cannot read: its More keeps
// answering true after an error, so going on would never end.
var errMalformed = errors.New("malformed JSON")

// walkValue reads one value from dec; where is its path, for the error.
func walkValue(dec *json.Decoder, where string) error {
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
				return fmt.Errorf("duplicate key %s in %s: a key may appear once in an object", strconv.Quote(key), where)
			}
			seen[key] = true
			if err := walkValue(dec, where+"."+key); err != nil {
				return err
			}
		}
		if _, err := dec.Token(); err != nil { // '}'
			return errMalformed
		}
	case json.Delim('['):
		for i := 0; dec.More(); i++ {
			if err := walkValue(dec, where+"["+strconv.Itoa(i)+"]"); err != nil {
				return err
			}
		}
		if _, err := dec.Token(); err != nil { // ']'
			return errMalformed
		}
	}
	return nil
}
