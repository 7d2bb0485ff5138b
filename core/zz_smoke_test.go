package core_test

import (
	"testing"
	"time"
	"fmt"
)

func TestZZSmoke(t *testing.T) {
	t0 := time.Now()
	n := mustNew(t, &Reg{}, data(t, 40))
	fmt.Println("new", time.Since(t0))
	m, err := n.Validate()
	fmt.Println("val", time.Since(t0), m, err)
	fmt.Println(n.ConfigReport(), n.BindingReport())
}
