package optimizers

import "github.com/gomlx/gomlx/pkg/core/graph"

// Shared holds graph nodes that every parameter array of one group's update can reuse: the
// step-dependent scalars (bias corrections, RAdam's rectification, hyperparameters converted to
// the parameters' dtype). Core applies a group's chain one array at a time so that XLA fuses each
// array's update in one pass; Shared keeps the scalar math emitted once per group, so only the
// elementwise math grows with the array count. A nil *Shared builds every time. Not safe for
// concurrent use (graph building is single-threaded).
type Shared struct {
	nodes  map[string]*graph.Node
	prefix string // a nested chain's scope, prepended to every key
}

// NewShared returns an empty Shared for one group's update in one graph.
func NewShared() *Shared { return &Shared{nodes: map[string]*graph.Node{}} }

// Node returns the node stored under key, building and storing it on first use. Keys are the
// transform's own ("<chain position>.<name>/<what>"), so two transforms never collide.
func (s *Shared) Node(key string, build func() *graph.Node) *graph.Node {
	if s == nil {
		return build()
	}
	key = s.prefix + key
	if n, ok := s.nodes[key]; ok {
		return n
	}
	n := build()
	s.nodes[key] = n
	return n
}

// within returns a view of s whose keys are scoped by prefix: a nested chain's members count
// positions from 0 again, so their keys would otherwise meet the outer members'.
func (s *Shared) within(prefix string) *Shared {
	if s == nil {
		return nil
	}
	return &Shared{nodes: s.nodes, prefix: s.prefix + prefix}
}
