package logjson

import (
	"fmt"
	"io"
	"os"
	"sync"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// ZapLogger is the logger contract over a caller's *zap.Logger: one structured entry per call,
// its message the line type ("params", "metrics", "other", "tags", "confusion", "finish") and
// its fields those of the matching JSONLogger line (type, context, epoch, step, then each
// metric). Finish logs at error level for StatusError, info otherwise; the first status wins,
// as for JSONLogger. Values are passed through as given (zap encodes NaN and ±Inf itself).
// The *zap.Logger stays the caller's: ZapLogger never syncs or replaces it. Safe for
// concurrent use.
type ZapLogger struct {
	z        *zap.Logger
	mu       sync.Mutex
	finished bool
}

var (
	_ Logger          = (*ZapLogger)(nil)
	_ Tagger          = (*ZapLogger)(nil)
	_ ConfusionLogger = (*ZapLogger)(nil)
	_ Backender       = (*ZapLogger)(nil)
)

// NewZap adapts z to the logger contract; nil means zap.NewNop().
func NewZap(z *zap.Logger) *ZapLogger {
	if z == nil {
		z = zap.NewNop()
	}
	return &ZapLogger{z: z}
}

// Backend is the *zap.Logger.
func (l *ZapLogger) Backend() any { return l.z }

// LogParams logs one "params" entry with params flattened (FlattenParams), sorted, one field
// each. A param named "type" is refused with ErrReservedKey.
func (l *ZapLogger) LogParams(params map[string]any) error {
	flat, err := FlattenParams(params)
	if err != nil {
		return err
	}
	if _, ok := flat["type"]; ok {
		return fmt.Errorf("%w: param %q collides with the entry's discriminator; rename it", ErrReservedKey, "type")
	}
	fields := make([]zap.Field, 0, len(flat)+1)
	fields = append(fields, zap.String("type", "params"))
	for _, k := range sortedKeys(flat) {
		fields = append(fields, zap.Any(k, flat[k]))
	}
	l.z.Info("params", fields...)
	return nil
}

// LogMetrics logs one "metrics" entry: type, context, epoch, step, then each value by name.
// A value named type, context, epoch or step is refused with ErrReservedKey.
func (l *ZapLogger) LogMetrics(m Metrics) error {
	if err := checkMetricNames(m.Values); err != nil {
		return err
	}
	fields := make([]zap.Field, 0, len(m.Values)+4)
	fields = append(fields,
		zap.String("type", "metrics"),
		zap.String("context", m.Context),
		zap.Int("epoch", m.Epoch),
		zap.Int("step", m.Step))
	for _, k := range sortedKeys(m.Values) {
		fields = append(fields, zap.Float64(k, m.Values[k]))
	}
	l.z.Info("metrics", fields...)
	return nil
}

// LogOther logs one "other" entry with key and value.
func (l *ZapLogger) LogOther(key string, value any) error {
	l.z.Info("other", zap.String("type", "other"), zap.String("key", key), zap.Any("value", value))
	return nil
}

// LogTags logs one "tags" entry.
func (l *ZapLogger) LogTags(tags []string) error {
	l.z.Info("tags", zap.String("type", "tags"), zap.Strings("tags", tags))
	return nil
}

// LogConfusion logs one "confusion" entry; the matrix must be square and labels, when given,
// must name each row.
func (l *ZapLogger) LogConfusion(matrix [][]int, labels []string, epoch int) error {
	if err := checkConfusion(matrix, labels); err != nil {
		return err
	}
	fields := []zap.Field{zap.String("type", "confusion"), zap.Int("epoch", epoch)}
	if labels != nil {
		fields = append(fields, zap.Strings("labels", labels))
	}
	fields = append(fields, zap.Any("matrix", matrix))
	l.z.Info("confusion", fields...)
	return nil
}

// Finish logs one "finish" entry, the first time only; a status outside the four is refused
// with ErrUnknownStatus.
func (l *ZapLogger) Finish(status Status) error {
	return finishOnce(status, &l.mu, &l.finished, func() error {
		l.finished = true
		fields := []zap.Field{zap.String("type", "finish"), zap.String("status", string(status))}
		if status == StatusError {
			l.z.Error("finish", fields...)
		} else {
			l.z.Info("finish", fields...)
		}
		return nil
	})
}

// The formats NewDiagnostics accepts.
const (
	FormatConsole = "console"
	FormatJSON    = "json"
	// FormatText reads like plain text: no timestamp, no level for info ("warning: " or
	// "error: " before the message otherwise), the message as it is (multi-line reports
	// included), then the fields as "  key value" pairs, floats with four decimals.
	FormatText = "text"
)

// NewDiagnostics builds the framework's own diagnostics logger (config and binding reports,
// warnings, monitor errors) writing to w (nil: standard error) at info level and above, in
// format: "console" (the default for "") for people, with time and level on every line,
// "text" (FormatText) for people reading it as plain text, "json" for machines. opts are applied to
// the logger (zap.WithClock, for example, to pin timestamps). An unknown format is refused.
func NewDiagnostics(w io.Writer, format string, opts ...zap.Option) (*zap.Logger, error) {
	if w == nil {
		w = os.Stderr
	}
	var enc zapcore.Encoder
	switch format {
	case "", FormatConsole:
		cfg := zap.NewDevelopmentEncoderConfig()
		cfg.EncodeTime = zapcore.TimeEncoderOfLayout("2006-01-02 15:04:05.000")
		cfg.CallerKey = zapcore.OmitKey
		cfg.StacktraceKey = zapcore.OmitKey
		enc = zapcore.NewConsoleEncoder(cfg)
	case FormatText:
		enc = newTextEncoder()
	case FormatJSON:
		cfg := zap.NewProductionEncoderConfig()
		cfg.EncodeTime = zapcore.ISO8601TimeEncoder
		cfg.CallerKey = zapcore.OmitKey
		cfg.StacktraceKey = zapcore.OmitKey
		enc = zapcore.NewJSONEncoder(cfg)
	default:
		return nil, fmt.Errorf("logjson: diagnostics format %q: want %q or %q", format, FormatConsole, FormatJSON)
	}
	core := zapcore.NewCore(enc, zapcore.Lock(zapcore.AddSync(w)), zapcore.InfoLevel)
	return zap.New(core, opts...), nil
}
