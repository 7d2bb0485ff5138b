package cli

import (
	"testing"

	"github.com/nitro-go/nitro/dist"
	"github.com/nitro-go/nitro/prefetch"
)

type plainBuilder struct{}

func (*plainBuilder) BuildData() (prefetch.Data, error) { return nil, nil }

type rankedBuilder struct{}

func (*rankedBuilder) BuildData(dist.Dist) (prefetch.Data, error) { return nil, nil }

// After training, the CLI evaluates the test split of an experiment that builds its data, in
// either BuildData form.
func TestHasBuildData(t *testing.T) {
	if !hasBuildData(&plainBuilder{}) || !hasBuildData(&rankedBuilder{}) || hasBuildData(&struct{}{}) {
		t.Errorf("hasBuildData: plain %v, ranked %v, none %v; want true, true, false",
			hasBuildData(&plainBuilder{}), hasBuildData(&rankedBuilder{}), hasBuildData(&struct{}{}))
	}
}
