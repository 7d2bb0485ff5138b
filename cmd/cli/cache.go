package cli

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/nitro-go/nitro/backend"
	"github.com/nitro-go/nitro/pjrthook/diskcache"
)

// newCacheCmd is `nitro cache ls|clear|verify` over the disk compile cache (docs/compilecache.md).
func newCacheCmd(stdout io.Writer) *cobra.Command {
	var dir string
	cache := &cobra.Command{
		Use:   "cache <command>",
		Short: "the compile cache on disk: ls, clear, verify",
		Long: "The persistent compile cache: compiled programs kept on disk so a second start compiles nothing. " +
			"Its folder is --dir, else $" + backend.EnvCompileCache + ", else os.UserCacheDir()/nitro/compile.",
		DisableFlagsInUseLine: true,
	}
	cache.PersistentFlags().StringVar(&dir, "dir", "", "the cache folder (default: $"+backend.EnvCompileCache+", else the user cache folder)")
	folder := func() (string, error) {
		if dir != "" {
			return dir, nil
		}
		d, off, source, err := backend.CompileCacheDir()
		if err != nil {
			return "", err
		}
		if off {
			return "", fmt.Errorf("%s is %q: name the folder with --dir", source, backend.CompileCacheOff)
		}
		return d, nil
	}
	// sub is one subcommand: no arguments, the folder resolved, then run.
	sub := func(name, short string, run func(dir string) error) *cobra.Command {
		return &cobra.Command{
			Use:   name,
			Short: short,
			Args: func(_ *cobra.Command, args []string) error {
				if len(args) > 0 {
					return fmt.Errorf("cache %s takes no arguments, got %v (the folder is --dir)", name, args)
				}
				return nil
			},
			RunE: func(*cobra.Command, []string) error {
				d, err := folder()
				if err != nil {
					return err
				}
				if err := run(d); err != nil {
					return fmt.Errorf("cache %s: %w", name, err)
				}
				return nil
			},
		}
	}
	cache.AddCommand(sub("ls", "the entries, most recently used first: key, size, last use, program", func(d string) error {
		entries, total, err := diskcache.List(d)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s: %d entries, %s\n", d, len(entries), diskcache.FormatSize(total))
		for _, e := range entries {
			fmt.Fprintf(stdout, "%.16s  %9s  %s  %s\n", e.Key, diskcache.FormatSize(e.Size), e.Used.Format(time.DateTime), e.Program)
		}
		return nil
	}))
	cache.AddCommand(sub("clear", "delete every entry (other files in the folder stay)", func(d string) error {
		n, bytes, err := diskcache.Clear(d)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s: removed %d entries, %s\n", d, n, diskcache.FormatSize(bytes))
		return nil
	}))
	cache.AddCommand(sub("verify", "check every entry whole (length, checksum, key) and delete those that are not", func(d string) error {
		ok, bad, err := diskcache.Verify(d, true)
		if err != nil {
			return err
		}
		for _, p := range bad {
			fmt.Fprintf(stdout, "removed %s: %s\n", p.File, p.Why)
		}
		fmt.Fprintf(stdout, "%s: %d entries whole, %d removed\n", d, ok, len(bad))
		return nil
	}))
	return cache
}
