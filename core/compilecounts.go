package core

import (
	"fmt"

	"github.com/nitro-go/nitro/backend"
)

// reportCompiles prints, after a run, how many programs the plugin compiled and how many the
// disk cache loaded in this process since New: the line that shows a second start compiling
// nothing. The pure-Go backend compiles nothing to disk and prints no line.
func (n *Nitro) reportCompiles() {
	if n.spec.console == nil || n.spec.backend == nil || n.spec.backend.Name == backend.Go {
		return
	}
	compiled, fromDisk := backend.CompileCounts()
	n.spec.console.Notice(fmt.Sprintf("compile cache: %d compiled, %d from disk (%.2fs)", compiled-n.spec.compiledAt[0], fromDisk-n.spec.compiledAt[1],
		backend.CompileSeconds()-n.spec.compileSecsAt))
}

// finishRun ends the run: the compile cache's entries still being written in the background
// land first (a process usually exits right after its run, which would drop them), then the
// record is finished.
func (n *Nitro) finishRun(err error) {
	backend.FlushCompileCache()
	n.log.finish(n.stopReason, err)
}
