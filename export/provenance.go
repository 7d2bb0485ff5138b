package export

import (
	"fmt"
	"path/filepath"

	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/exportbundle"
)

// exportProvenance assembles the provenance, lowest precedence first: the framework's facts (the
// view's, and the plugin the programs are compiled through), the site's repository state (only
// with a ProvenanceRoot), the model's hook, the explicit argument. It returns the extra files
// (the working-tree patch) too.
func exportProvenance(m *core.ModelView, spec ExportSpec, p *exportPlan) (map[string]string, map[string][]byte, error) {
	prov := m.Provenance()
	prov["pjrt_plugin"] = filepath.Base(p.plugin)
	var extra map[string][]byte
	if spec.ProvenanceRoot != "" {
		site, patch, err := exportbundle.SiteProvenance(spec.ProvenanceRoot)
		if err != nil {
			return nil, nil, fmt.Errorf("ExportSpec.ProvenanceRoot: %w", err)
		}
		if len(patch) > 0 {
			site["git_patch"] = PatchFile
			extra = map[string][]byte{PatchFile: patch}
		}
		for k, v := range site {
			prov[k] = v
		}
	}
	if h, ok := m.Experiment().(core.ExportProvenancer); ok {
		hook, err := callProvenanceHook(h)
		if err != nil {
			return nil, nil, err
		}
		for k, v := range hook {
			if err := exportbundle.CheckName("ExportProvenance key", k); err != nil {
				return nil, nil, err
			}
			prov[k] = v
		}
	}
	for k, v := range spec.Provenance {
		prov[k] = v
	}
	return prov, extra, nil
}

func callProvenanceHook(h core.ExportProvenancer) (m map[string]string, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = panicError("ExportProvenance", r)
		}
	}()
	return h.ExportProvenance(), nil
}
