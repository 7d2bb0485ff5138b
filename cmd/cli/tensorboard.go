package cli

import (
	"github.com/nitro-go/nitro/logjson"
	"github.com/nitro-go/nitro/tblog"
)

// tensorBoardUsage is --tensorboard's help. The flag is off by default: the JSON Lines record is
// the one record nitro plot, nitro board and a resume read, the event files repeat it (a second
// file and a write per record), and TensorBoard is a separate install; docs/logging.md says so.
const tensorBoardUsage = "also write the run as TensorBoard event files in <run dir>/tb (tensorboard --logdir runs shows them); an experiment whose Logger() writes them already is left as it is"

// withTensorBoard adds a tblog.Writer to the run's loggers unless one of them writes TensorBoard's
// event files already (an experiment's Logger() of logjson.Multi(..., new(tblog.Writer))): two
// writers would put every point in tb/ twice. Core places the writer in <run dir>/tb.
func withTensorBoard(loggers []logjson.Logger) []logjson.Logger {
	for _, l := range loggers {
		if tensorBoardWriter(l) != nil {
			return loggers
		}
	}
	return append(loggers, new(tblog.Writer))
}

// tensorBoardWriter is the tblog.Writer l is or holds (through logjson.Multi), nil when none.
func tensorBoardWriter(l logjson.Logger) *tblog.Writer {
	switch l := l.(type) {
	case *tblog.Writer:
		return l
	case *logjson.MultiLogger:
		for _, m := range l.Members() {
			if w := tensorBoardWriter(m); w != nil {
				return w
			}
		}
	}
	return nil
}
