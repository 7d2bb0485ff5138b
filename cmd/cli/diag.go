package cli

import (
	"fmt"
	"io"
	"strings"

	"go.uber.org/zap"

	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/logjson"
)

// The --log-format values.
const (
	formatConsole = logjson.FormatConsole
	formatJSON    = logjson.FormatJSON
)

// checkLogFormat refuses a --log-format value other than console or json.
func checkLogFormat(format string) error {
	if format != formatConsole && format != formatJSON {
		return fmt.Errorf("--log-format %q: want %s or %s", format, formatConsole, formatJSON)
	}
	return nil
}

// newDiagnostics builds the zap logger the framework's own diagnostics go through, writing to w
// at info level and above. "json" is logjson.FormatJSON: one object per line with "level", "ts",
// "msg" and the fields. "console" is for people: logjson.FormatText, which reads like plain text
// (no timestamp, no level for info, the fields as "  key value" pairs), not logjson's
// FormatConsole, which stamps the time and level on every line.
func newDiagnostics(w io.Writer, format string) (*zap.Logger, error) {
	if err := checkLogFormat(format); err != nil {
		return nil, err
	}
	if format == formatJSON {
		return logjson.NewDiagnostics(w, logjson.FormatJSON)
	}
	return logjson.NewDiagnostics(w, logjson.FormatText)
}

// zapConsole is core's Console over the diagnostics logger: one entry per report, one per epoch
// with structured fields, one per notice. In console format (text) an epoch's number is in the
// message, "epoch 2/5", which the fields then follow; in JSON the message is "epoch" and the
// fields carry epoch and max_epochs.
type zapConsole struct {
	z    *zap.Logger
	text bool
}

var _ core.Console = zapConsole{}

// Reports logs the config report and the binding report, one entry each: in console format the
// text as it is; in JSON, message "config report" / "binding report" with the text in "text".
func (c zapConsole) Reports(config, binding string) {
	for _, r := range []struct{ msg, text string }{{"config report", config}, {"binding report", binding}} {
		text := strings.TrimRight(r.text, "\n")
		switch {
		case text == "":
		case c.text:
			c.z.Info(text)
		default:
			c.z.Info(r.msg, zap.String("text", text))
		}
	}
}

// Epoch logs one entry: epoch, max_epochs, train_loss, the epoch's headline metrics (the
// ranking metric and a few more, or the experiment's Headline; the record keeps them all),
// seconds and steps_per_second.
func (c zapConsole) Epoch(r core.EpochResult, maxEpochs int) {
	fields := make([]zap.Field, 0, 6+len(r.Train)+len(r.Val))
	msg := "epoch"
	switch {
	case c.text:
		msg = r.Where(maxEpochs)
	case r.TotalSteps > 0:
		fields = append(fields, zap.Int("step", r.Step), zap.Int("total_steps", r.TotalSteps), zap.Int("epoch", r.Epoch))
	default:
		fields = append(fields, zap.Int("epoch", r.Epoch), zap.Int("max_epochs", maxEpochs))
	}
	fields = append(fields, zap.Float64("train_loss", r.TrainLoss))
	for _, m := range r.HeadlineValues() {
		fields = append(fields, zap.Float64(m.Name, m.Value))
	}
	fields = append(fields, zap.Float64("seconds", r.Seconds),
		zap.Float64("steps_per_second", r.StepsPerSecond))
	if r.TokensPerSecond > 0 {
		fields = append(fields, zap.Float64("tokens_per_second", r.TokensPerSecond))
	}
	if r.MFU > 0 {
		fields = append(fields, zap.Float64("mfu", r.MFU))
	}
	c.z.Info(msg, fields...)
}

// Notice logs msg (a recompile and why, where the weights came from) at info level.
func (c zapConsole) Notice(msg string) { c.z.Info(msg) }

// floatFields is one float field per metric, in order.
func floatFields(ms []metric) []zap.Field {
	fields := make([]zap.Field, len(ms))
	for i, m := range ms {
		fields[i] = zap.Float64(m.name, m.value)
	}
	return fields
}

// results prints the CLI's own result lines (stopped, test metrics, compile cache, the files a
// run left) on the diagnostics logger: in console format the line as it reads today, in JSON an
// entry with a short message and structured fields.
type results struct {
	z    *zap.Logger
	text bool
}

func (r results) say(line, msg string, fields ...zap.Field) {
	if r.text {
		r.z.Info(line)
		return
	}
	r.z.Info(msg, fields...)
}
