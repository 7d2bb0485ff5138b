// Package fieldcheck collects the out-of-range fields of an example's configuration, so that its
// check refuses them all at once, each named with its value and the range wanted. A Checker is
// not safe for concurrent use.
package fieldcheck

import (
	"fmt"
	"math"
	"strings"
)

// Checker accumulates problems; the zero value is ready.
type Checker struct{ bad []string }

// AtLeast records name = v unless v >= min.
func (c *Checker) AtLeast(name string, v, min int) {
	if v < min {
		c.bad = append(c.bad, fmt.Sprintf("%s = %d: want >= %d", name, v, min))
	}
}

// Float records name = v, wanting want, unless ok holds and v is finite.
func (c *Checker) Float(name string, v float64, ok bool, want string) {
	if !ok || math.IsNaN(v) || math.IsInf(v, 0) {
		c.bad = append(c.bad, fmt.Sprintf("%s = %g: want %s", name, v, want))
	}
}

// Add records a problem stated in full.
func (c *Checker) Add(format string, args ...any) {
	c.bad = append(c.bad, fmt.Sprintf(format, args...))
}

// BatchFits records a batch size larger than the training set (not one full batch would train).
func (c *Checker) BatchFits(batch, trainN int, trainName string) {
	if batch > trainN && trainN >= 1 {
		c.Add("BatchSize = %d exceeds %s = %d: not one full batch would train", batch, trainName, trainN)
	}
}

// Err is every problem recorded, joined by "; ", or nil.
func (c *Checker) Err() error {
	if len(c.bad) == 0 {
		return nil
	}
	return fmt.Errorf("%s", strings.Join(c.bad, "; "))
}
