package backend

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/nitro-go/nitro/pjrthook"
	"github.com/nitro-go/nitro/pjrthook/diskcache"
)

// EnvCompileCache chooses the persistent compile cache: a folder, or "off". Unset, the cache is
// in DefaultCompileCacheDir.
const EnvCompileCache = "NITRO_COMPILE_CACHE"

// EnvRank is a multi-process run's rank; only rank 0 writes compile cache entries.
const EnvRank = "NITRO_RANK"

// CompileCacheOff is the setting that turns the disk cache off.
const CompileCacheOff = "off"

// DefaultCompileCacheDir is os.UserCacheDir()/nitro/compile ($XDG_CACHE_HOME/nitro/compile, else
// ~/.cache/nitro/compile on Linux).
func DefaultCompileCacheDir() (string, error) {
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no user cache folder for the compile cache (%v): set $%s to a folder, or to %q", err, EnvCompileCache, CompileCacheOff)
	}
	return filepath.Join(d, "nitro", "compile"), nil
}

// CompileCache is the disk cache's state, for the config report.
type CompileCache struct {
	Dir     string // absolute; "" when off
	Source  string // what chose it: "the default", "$NITRO_COMPILE_CACHE", the caller's words
	Warning string // set when the folder cannot be used: the run compiles everything itself
}

// String is the report's text: the folder, its size and where the setting came from.
func (c CompileCache) String() string {
	if c.Warning != "" {
		return "off: " + c.Warning
	}
	if c.Dir == "" {
		return "off (" + c.Source + ")"
	}
	bytes, n, err := diskcache.Size(c.Dir)
	if err != nil {
		return fmt.Sprintf("%s (%s; size unreadable: %v)", c.Dir, c.Source, err)
	}
	return fmt.Sprintf("%s (%d entries, %s; %s)", c.Dir, n, diskcache.FormatSize(bytes), c.Source)
}

var (
	cacheMu sync.Mutex
	caches  = map[string]*diskcache.Cache{} // folder and rank -> the process's one Cache on it
)

// UseCompileCache sets the process's disk cache for every compile from now on: setting is a
// folder, "off", or "" for $NITRO_COMPILE_CACHE, then DefaultCompileCacheDir; source names
// where a non-empty setting came from (an option, a flag). The cache is process-wide: the last
// call wins. A folder that cannot be made is not an error: the cache is off, and Warning says so.
func UseCompileCache(setting, source string) CompileCache {
	return useCompileCache(CacheSetting{Dir: setting, Source: source})
}

// CacheSetting chooses the disk compile cache: Dir is a folder, "off", or "" for
// $NITRO_COMPILE_CACHE and then the default folder; Source names where Dir came from. Rank, when
// RankSet, is the process's rank in a multi-process run (else $NITRO_RANK); only rank 0 writes.
type CacheSetting struct {
	Dir     string
	Source  string
	Rank    int
	RankSet bool
}

func useCompileCache(cs CacheSetting) CompileCache {
	setting, source := cs.Dir, cs.Source
	if setting == "" {
		setting, source = os.Getenv(EnvCompileCache), "$"+EnvCompileCache
		if strings.TrimSpace(setting) == "" {
			d, err := DefaultCompileCacheDir()
			if err != nil {
				pjrthook.SetDisk(nil)
				return CompileCache{Source: "the default", Warning: err.Error()}
			}
			setting, source = d, "the default"
		}
	}
	setting = strings.TrimSpace(setting)
	if strings.EqualFold(setting, CompileCacheOff) {
		pjrthook.SetDisk(nil)
		return CompileCache{Source: source}
	}
	rank, rankErr := rankFromEnv()
	if cs.RankSet {
		rank, rankErr = cs.Rank, nil
	}
	cacheMu.Lock()
	defer cacheMu.Unlock()
	abs, _ := filepath.Abs(setting)
	key := abs + "\x00" + strconv.Itoa(rank)
	c, ok := caches[key]
	if !ok {
		var err error
		c, err = diskcache.Open(diskcache.Options{Dir: setting, Rank: rank})
		if err != nil {
			pjrthook.SetDisk(nil)
			return CompileCache{Source: source, Warning: fmt.Sprintf("%v (from %s): every program compiles in this process; fix the folder or set $%s to another one, or to %q", err, source, EnvCompileCache, CompileCacheOff)}
		}
		caches[key] = c
	}
	pjrthook.SetDisk(c)
	for _, p := range pjrthook.Plugins() {
		c.Prepare(p)
	}
	out := CompileCache{Dir: c.Dir(), Source: source}
	if rankErr != nil {
		out.Source += "; " + rankErr.Error()
	}
	return out
}

// rankFromEnv reads $NITRO_RANK (0 when unset). A value that is not a rank writes nothing: a
// process that cannot tell it is rank 0 must not race the others.
func rankFromEnv() (int, error) {
	s, ok := os.LookupEnv(EnvRank)
	if !ok || strings.TrimSpace(s) == "" {
		return 0, nil
	}
	r, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || r < 0 {
		return 1, fmt.Errorf("$%s=%q is not a rank, so this process writes no cache entries", EnvRank, s)
	}
	return r, nil
}

// CompileCounts are the process's compiles through the interposer so far: by the plugin, and
// loaded from the disk cache. Report a span as the difference of two.
func CompileCounts() (compiled, fromDisk int64) {
	s := pjrthook.Stats()
	return s.Compiled, s.FromDisk
}

// FlushCompileCache returns once the disk compile cache's entries still being written in the
// background are written. The interposer serializes each compiled program off the compile's
// path, so a process that exits without this leaves those entries out (compiled again next
// time, never torn). Cheap when nothing is pending.
func FlushCompileCache() { pjrthook.Flush() }

// CompileSeconds is the time the process has spent in compiles through the interposer so far,
// loads from the disk cache included.
func CompileSeconds() float64 { return pjrthook.Stats().Seconds }

// interposed returns the name to start a PJRT plugin under: the interposer's over plugin, so the
// disk cache (and the compile counts) see every compile. If the interposer cannot bind, the
// plugin is started as it is, and the reason comes back to be warned about.
func interposed(plugin string) (name string, warning string) {
	n, err := pjrthook.Register(plugin)
	if err != nil {
		return plugin, fmt.Sprintf("the compile cache is off for %s: %v", plugin, err)
	}
	return n, ""
}

// CompileCacheDir is the folder the disk compile cache uses with no option given: $NITRO_COMPILE_CACHE,
// else DefaultCompileCacheDir. off is true when the variable says "off"; source names the choice.
func CompileCacheDir() (dir string, off bool, source string, err error) {
	if s := strings.TrimSpace(os.Getenv(EnvCompileCache)); s != "" {
		if strings.EqualFold(s, CompileCacheOff) {
			return "", true, "$" + EnvCompileCache, nil
		}
		abs, err := filepath.Abs(s)
		return abs, false, "$" + EnvCompileCache, err
	}
	d, err := DefaultCompileCacheDir()
	return d, false, "the default", err
}
