package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/nitro-go/nitro/board"
)

const boardLong = `Serves a web page comparing the runs in the given run directories while they train: every
metric's curve with the runs overlaid (train per optimizer step, validation and data per epoch, or at their steps for a step-based run),
the config fields that differ between the runs, and each run's phase, step, steps/s, stop reason
and best checkpoint. It tails each <run dir>/metrics.jsonl (a run that has not started yet is
shown waiting; one whose folder disappears, gone) and the page refreshes itself every --refresh.
A folder with no metrics.jsonl of its own (nitro board runs) is watched: it stands for the runs
in it, up to three levels down, looked for again at every refresh, so a run started later shows
up without a restart (at most --max-runs runs in all; the page names any past it). The page's
controls pick the x axis (step, epoch, or train time: the sum of the logged step_seconds), an
exponential smoothing, and the runs drawn; metrics differing only in a numeric suffix
(val_accuracy_0 ... val_accuracy_9) share one chart with a legend.
A sweep dir (nitro sweep's, holding journal.log), given or found in a watched folder, shows its
trials' runs (named trial 0, trial 1, ...) and, first on the page, the sweep: the trials ranked
by its metric, best first and marked, with each field's value; every trial's reported values on
one chart (a pruned trial's curve ends where it stopped); and one chart per field of the metric
against the field's value.
It listens on loopback unless --addr says otherwise; the board has no authentication, so an
address others can reach shows them every run's config. Stops on SIGINT or SIGTERM.`

func newBoardCmd(stdout, stderr io.Writer) *cobra.Command {
	var (
		addr    string
		refresh time.Duration
		points  int
		maxRuns int
	)
	c := &cobra.Command{
		Use:                   "board <run dir>... [--addr ADDR] [--refresh D] [--max-points N] [--max-runs N]",
		Short:                 "a local web page comparing runs live (curves, config diff, phase, best checkpoint; a sweep's trials ranked)",
		Long:                  boardLong,
		DisableFlagsInUseLine: true,
		ValidArgsFunction:     dirsOnly,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return errors.New("board needs one or more run directories, e.g. nitro board runs/MLP runs/CNN")
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			if addr == "" {
				return errors.New("--addr: empty value (e.g. 127.0.0.1:6006; port 0 picks one)")
			}
			for _, dir := range args {
				if fi, err := os.Stat(dir); err == nil && !fi.IsDir() {
					return fmt.Errorf("board: %s is a file; give its run directory (the folder holding %s)", dir, board.MetricsFile)
				}
			}
			runs, watch := splitRunDirs(args)
			for _, w := range watch {
				found, _ := board.FindRuns(w)
				fmt.Fprintf(stdout, "board: watching %s for runs (%s now%s)\n", w, runCount(len(found)), listed(found))
			}
			// The flags' defaults are set, so a zero here was typed: the package would read it as
			// "the default", which is not what the user asked for.
			if refresh <= 0 {
				return fmt.Errorf("board: --refresh %v: the page's refresh period is positive (e.g. 2s)", refresh)
			}
			if points < 2 {
				return fmt.Errorf("board: --max-points %d: at least 2 points per curve (e.g. 1000)", points)
			}
			if maxRuns < len(runs) || maxRuns < 1 {
				return fmt.Errorf("board: --max-runs %d: %s given; raise it (e.g. --max-runs %d)", maxRuns, runCount(len(runs)), max(50, len(runs)))
			}
			host, _, _ := net.SplitHostPort(addr)
			b, err := board.New(board.Config{Runs: runs, Watch: watch, MaxRuns: maxRuns, Refresh: refresh, MaxPoints: points, LoopbackHostOnly: isLoopback(host)})
			if err != nil {
				return fmt.Errorf("%w (flags --refresh, --max-points, --max-runs)", err)
			}
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return fmt.Errorf("board: --addr %s: %w", addr, err)
			}
			if !isLoopback(host) {
				fmt.Fprintf(stderr, "nitro: board: warning: listening on %s, not loopback: anyone who reaches it sees every run's config\n", ln.Addr())
			}
			srv := &http.Server{Handler: b, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute}
			ctx, stop := signal.NotifyContext(c.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			served := make(chan error, 1)
			go func() { served <- srv.Serve(ln) }()
			fmt.Fprintf(stdout, "board: http://%s/ (%s%s; Ctrl+C stops)\n", ln.Addr(), runCount(len(runs)), watching(len(watch)))
			select {
			case err := <-served:
				return fmt.Errorf("board: %w", err)
			case <-ctx.Done():
			}
			stop()
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := srv.Shutdown(sctx); err != nil {
				srv.Close()
			}
			return nil
		},
	}
	fs := c.Flags()
	fs.SortFlags = false
	fs.StringVar(&addr, "addr", "127.0.0.1:6006", "listen on `ADDR` (host:port; port 0 picks one)")
	fs.DurationVar(&refresh, "refresh", 2*time.Second, "the page fetches fresh content every `D`")
	fs.IntVar(&points, "max-points", 1000, "keep at most `N` points per curve (longer runs are decimated evenly)")
	fs.IntVar(&maxRuns, "max-runs", 50, "follow at most `N` runs, given and found in watched folders together")
	c.SetFlagErrorFunc(flagError)
	return c
}

// isLoopback reports whether host (from --addr) names only this machine; "" (all interfaces)
// does not.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// splitRunDirs sorts the arguments: a folder holding a metrics.jsonl, or one that does not exist
// yet (the board shows it waiting), is a run; any other folder is watched for the runs in it
// (a parent such as runs/, or a run dir whose file is not written yet: it becomes its own run).
func splitRunDirs(args []string) (runs, watch []string) {
	for _, dir := range args {
		fi, err := os.Stat(dir)
		if _, ferr := os.Stat(filepath.Join(dir, board.MetricsFile)); ferr == nil || err != nil || !fi.IsDir() {
			runs = append(runs, dir)
			continue
		}
		watch = append(watch, dir)
	}
	return runs, watch
}

// listed is ": a, b" for the runs found now, the first few only.
func listed(dirs []string) string {
	if len(dirs) == 0 {
		return ""
	}
	if len(dirs) > 5 {
		return ": " + strings.Join(dirs[:5], ", ") + ", ..."
	}
	return ": " + strings.Join(dirs, ", ")
}

func watching(n int) string {
	switch n {
	case 0:
		return ""
	case 1:
		return " given, 1 folder watched"
	}
	return fmt.Sprintf(" given, %d folders watched", n)
}

func runCount(n int) string {
	if n == 1 {
		return "1 run"
	}
	return fmt.Sprintf("%d runs", n)
}
