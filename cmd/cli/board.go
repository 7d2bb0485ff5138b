package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
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
metric's curve with the runs overlaid (train per optimizer step, validation and data per epoch),
the config fields that differ between the runs, and each run's phase, step, steps/s, stop reason
and best checkpoint. It tails each <run dir>/metrics.jsonl (a run that has not started yet is
shown waiting; one whose folder disappears, gone) and the page refreshes itself every --refresh.
A folder with no metrics.jsonl of its own that holds runs below it (nitro board runs) stands for
those runs, up to three levels down.
It listens on loopback unless --addr says otherwise; the board has no authentication, so an
address others can reach shows them every run's config. Stops on SIGINT or SIGTERM.`

func newBoardCmd(stdout, stderr io.Writer) *cobra.Command {
	var (
		addr    string
		refresh time.Duration
		points  int
	)
	c := &cobra.Command{
		Use:                   "board <run dir>... [--addr ADDR] [--refresh D] [--max-points N]",
		Short:                 "a local web page comparing runs live (curves, config diff, phase, best checkpoint)",
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
			runs, expanded := expandRunDirs(args)
			for _, e := range expanded {
				fmt.Fprintln(stdout, "board:", e)
			}
			// The flags' defaults are set, so a zero here was typed: the package would read it as
			// "the default", which is not what the user asked for.
			if refresh <= 0 {
				return fmt.Errorf("board: --refresh %v: the page's refresh period is positive (e.g. 2s)", refresh)
			}
			if points < 2 {
				return fmt.Errorf("board: --max-points %d: at least 2 points per curve (e.g. 1000)", points)
			}
			host, _, _ := net.SplitHostPort(addr)
			b, err := board.New(board.Config{Runs: runs, Refresh: refresh, MaxPoints: points, LoopbackHostOnly: isLoopback(host)})
			if err != nil {
				return fmt.Errorf("%w (flags --refresh, --max-points)", err)
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
			fmt.Fprintf(stdout, "board: http://%s/ (%s; Ctrl+C stops)\n", ln.Addr(), runCount(len(runs)))
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

// runSearchDepth is how many folder levels below a given folder expandRunDirs looks for runs:
// runs/<experiment>/<sweep point> is three.
const runSearchDepth = 3

// expandRunDirs replaces each folder that has no metrics.jsonl of its own but holds runs below it
// (a parent such as runs/) by those runs, in path order, and says what it expanded. A folder that
// holds no run, or does not exist yet, stays as given: the board shows it waiting.
func expandRunDirs(dirs []string) (runs, expanded []string) {
	for _, dir := range dirs {
		if _, err := os.Stat(filepath.Join(dir, board.MetricsFile)); err == nil {
			runs = append(runs, dir)
			continue
		}
		var below []string
		root := filepath.Clean(dir)
		filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return nil // an unreadable folder holds no run we can show
			}
			if path == root {
				return nil
			}
			if _, err := os.Stat(filepath.Join(path, board.MetricsFile)); err == nil {
				below = append(below, path)
				return fs.SkipDir // a run's own folders (checkpoints, plots) are not runs
			}
			if strings.Count(strings.TrimPrefix(path, root), string(filepath.Separator)) >= runSearchDepth {
				return fs.SkipDir
			}
			return nil
		})
		if len(below) == 0 {
			runs = append(runs, dir)
			continue
		}
		runs = append(runs, below...)
		expanded = append(expanded, fmt.Sprintf("%s holds %s: %s", dir, runCount(len(below)), strings.Join(below, ", ")))
	}
	return runs, expanded
}

func runCount(n int) string {
	if n == 1 {
		return "1 run"
	}
	return fmt.Sprintf("%d runs", n)
}
