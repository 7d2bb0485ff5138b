package markers

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
	"unsafe"

	"github.com/gomlx/gomlx/pkg/core/graph"
)

// ZeroHost returns a *E copy of e (an E or a *E) with every Host field, unexported ones
// included, at its zero value; GraphConst and Device fields are copied as they are.
func ZeroHost(e any) (any, error) {
	tr, v, err := readStruct(e)
	if err != nil {
		return nil, err
	}
	p := reflect.New(tr.Type)
	for _, f := range tr.Fields {
		if f.Kind != KindHost { // marked fields are exported, so settable
			p.Elem().Field(f.Index).Set(v.Field(f.Index))
		}
	}
	return p.Interface(), nil
}

// BindDevice returns a *E copy of e (an E or a *E) in which every Device field is bound to its
// node from nodes, keyed by field name. Every Device field needs a node of its host value's
// dtype and shape (see DeviceShapeOf), and every key must be a Device field.
func BindDevice(e any, nodes map[string]*graph.Node) (any, error) {
	tr, v, err := readStruct(e)
	if err != nil {
		return nil, err
	}
	p := reflect.New(tr.Type)
	p.Elem().Set(v)
	var problems []string
	for _, f := range tr.Fields {
		if f.Kind != KindDevice {
			continue
		}
		fv := p.Elem().Field(f.Index)
		slot := fv.Interface().(deviceSlot)
		want, err := hostShape(tr, f, slot.hostValue())
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		n := nodes[f.Name]
		if n == nil {
			problems = append(problems, fmt.Sprintf("Device field %s has no node: give it a parameter of shape %s", f.Name, want))
			continue
		}
		if got := n.Shape(); !got.Equal(want) {
			problems = append(problems, fmt.Sprintf("the node for Device field %s has shape %s, but its host value has %s: "+
				"create the parameter with DeviceShapeOf", f.Name, got, want))
			continue
		}
		fv.Set(slot.withNode(f.Name, n))
	}
	for _, name := range sortedKeys(nodes) {
		if f, ok := tr.Field(name); !ok || f.Kind != KindDevice {
			problems = append(problems, fmt.Sprintf("%s is not a Device field (Device fields: %s)", name, orNone(tr.DeviceFields())))
		}
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("markers: BindDevice on %s: %s", tr.Name, strings.Join(problems, "; "))
	}
	return p.Interface(), nil
}

// CompileView is what traced hooks receive: BindDevice(ZeroHost(e), nodes). GraphConst fields
// keep their values (they bake), Device fields are graph inputs, Host fields are zero.
func CompileView(e any, nodes map[string]*graph.Node) (any, error) {
	z, err := ZeroHost(e)
	if err != nil {
		return nil, err
	}
	return BindDevice(z, nodes)
}

// HostReadError says that traced code reads Host fields: the program built from the compile
// view differs from the one built from the experiment, or the build from the view failed.
type HostReadError struct {
	Experiment string
	// Fields are the Host fields the difference was traced to, in declaration order.
	Fields []string
	// Types are the Fields' types, index for index.
	Types []reflect.Type
	// Failure is the panic or error of the build from the view, if it failed ("" if it built).
	Failure string
	// Unattributed is set when no single Host field explains the difference (Fields then lists
	// every Host field that holds a non-zero value).
	Unattributed bool
}

// Error names the fields and offers the three fixes with their consequences: the framework
// cannot know which was meant, and most often the answer is the third.
func (e *HostReadError) Error() string {
	var b strings.Builder
	s, it := "", "it"
	if len(e.Fields) > 1 {
		s, it = "s", "each"
	}
	fmt.Fprintf(&b, "markers: reading Host field%s %s of %s from traced code: ", s, strings.Join(e.Fields, ", "), e.Experiment)
	if e.Failure != "" {
		fmt.Fprintf(&b, "building from the compile view, where Host fields are zero, failed (%s)", e.Failure)
	} else {
		b.WriteString("the program built from the compile view, where Host fields are zero, differs from the one built from the experiment")
	}
	if e.Unattributed {
		b.WriteString(" (no single field explains it; together they do)")
	}
	device := "markers.Device[T]"
	if len(e.Types) == 1 && checkDeviceElem(e.Types[0]) == nil {
		device = fmt.Sprintf("markers.Device[%s]", e.Types[0])
	}
	fmt.Fprintf(&b, ". Mark %s GraphConst (`nitro:\"graphconst\"`: bakes into the program, recompiles per distinct value) "+
		"or Device (%s: a traced input, no recompile), or keep %s host-side (read it only outside traced code)", it, device, it)
	var private []string
	for _, name := range e.Fields {
		if r, _ := utf8.DecodeRuneInString(name); !unicode.IsUpper(r) {
			private = append(private, name)
		}
	}
	if len(private) > 0 {
		verb := " is"
		if len(private) > 1 {
			verb = " are"
		}
		fmt.Fprintf(&b, "; %s%s unexported: export it to mark it", strings.Join(private, ", "), verb)
	}
	return b.String()
}

// CheckHostIndependent checks that traced code does not read Host fields. build is called with
// *E copies of e (Device fields unbound, so build makes its own graph, a parameter per Device
// field, calls BindDevice, traces, and returns Fingerprint of the graph): one copy as e is, one
// with every Host field zeroed. Equal fingerprints mean the program does not depend on Host
// fields: nil. Otherwise the culprits are found by zeroing Host fields in halves (bisection)
// and a *HostReadError names them. A panic in build is recovered and counts as a difference for
// a zeroed build (a zeroed Host slice indexed); a failure of the build from e itself is returned
// as it is, since no Host field was touched. build is called sequentially.
func CheckHostIndependent(e any, build func(src any) (string, error)) error {
	tr, v, err := readStruct(e)
	if err != nil {
		return err
	}
	realCopy := func() reflect.Value {
		p := reflect.New(tr.Type)
		p.Elem().Set(v)
		return p
	}
	want, err := runBuild(build, realCopy().Interface())
	if err != nil {
		return fmt.Errorf("markers: building from %s itself failed, before any Host field was zeroed: %w", tr.Name, err)
	}
	var candidates []Field // only a Host field holding a non-zero value can be told apart by zeroing
	for _, f := range tr.Fields {
		if f.Kind == KindHost && !v.Field(f.Index).IsZero() {
			candidates = append(candidates, f)
		}
	}
	differs := func(zeroed []Field) (bool, error) {
		p := realCopy()
		for _, f := range zeroed {
			settable(p.Elem().Field(f.Index)).SetZero()
		}
		got, err := runBuild(build, p.Interface())
		return err != nil || got != want, err
	}
	diff, failure := differs(candidates)
	if !diff {
		return nil
	}
	if len(candidates) == 0 { // cannot happen for a deterministic build
		return fmt.Errorf("markers: two builds from the same %s gave different programs: the build is not "+
			"deterministic (does it read global state, the clock, or a random source?)", tr.Name)
	}
	culprits := bisect(candidates, differs)
	hre := &HostReadError{Experiment: tr.Name}
	if failure != nil {
		hre.Failure = failure.Error()
	}
	if len(culprits) == 0 {
		culprits, hre.Unattributed = candidates, true
	}
	sort.Slice(culprits, func(i, j int) bool { return culprits[i].Index < culprits[j].Index })
	for _, f := range culprits {
		hre.Fields = append(hre.Fields, f.Name)
		hre.Types = append(hre.Types, f.Type)
	}
	return hre
}

// bisect returns the fields whose zeroing changes the build, assuming set as a whole does.
func bisect(set []Field, differs func([]Field) (bool, error)) []Field {
	if len(set) == 1 {
		return set
	}
	mid := len(set) / 2
	var out []Field
	for _, half := range [][]Field{set[:mid], set[mid:]} {
		if d, _ := differs(half); d {
			out = append(out, bisect(half, differs)...)
		}
	}
	return out
}

// settable returns an assignable view of a field of an addressable struct, unexported or not:
// the check must zero private Host state too, or traced code could read it unseen.
func settable(f reflect.Value) reflect.Value {
	if f.CanSet() {
		return f
	}
	return reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem()
}

// runBuild calls build, turning a panic into an error.
func runBuild(build func(any) (string, error), src any) (fp string, err error) {
	defer func() {
		if r := recover(); r != nil {
			if rerr, ok := r.(error); ok {
				err = fmt.Errorf("panic: %w", rerr)
			} else {
				err = fmt.Errorf("panic: %v", r)
			}
		}
	}()
	return build(src)
}
