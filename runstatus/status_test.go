package runstatus_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/nitro-go/nitro/runstatus"
)

func TestValidAndCheck(t *testing.T) {
	for _, s := range []runstatus.Status{runstatus.Completed, runstatus.EarlyStop, runstatus.Requested, runstatus.Error} {
		if !s.Valid() || s.Check() != nil {
			t.Errorf("%q: Valid %v, Check %v; want valid", s, s.Valid(), s.Check())
		}
	}
	for _, s := range []runstatus.Status{"", "crashed", "Completed"} {
		err := s.Check()
		if s.Valid() || !errors.Is(err, runstatus.ErrUnknown) || !strings.Contains(err.Error(), `"`+string(s)+`"`) || !strings.Contains(err.Error(), "want completed, early_stop, requested or error") {
			t.Errorf("%q: Valid %v, Check %v; want refused, naming it and the four", s, s.Valid(), err)
		}
	}
}
