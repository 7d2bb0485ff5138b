package compilecache

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"runtime/debug"
	"strings"
	"sync"
)

var buildIdentity = sync.OnceValue(computeBuildIdentity)

// BuildIdentity names the code this process runs, for stamping whatever outlives it (checkpoint record,
// export manifest): within a process hooks cannot be redefined, so the build is the
// unit of code identity. Computed once. Its form is space-separated fields, each present when known:
//
//	<main module path>@<version> vcs.revision=<rev> vcs.modified=<true|false> exe=sha256:<12 hex>
//
// exe hashes the bytes of os.Executable, so two binaries built from the same dirty tree still differ when
// their code does. It returns "unknown" when neither build info nor the executable can be read.
func BuildIdentity() string { return buildIdentity() }

func computeBuildIdentity() string {
	var parts []string
	if info, ok := debug.ReadBuildInfo(); ok {
		if info.Main.Path != "" {
			parts = append(parts, info.Main.Path+"@"+info.Main.Version)
		}
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" || s.Key == "vcs.modified" {
				parts = append(parts, s.Key+"="+s.Value)
			}
		}
	}
	if sum, err := executableHash(); err == nil {
		parts = append(parts, "exe=sha256:"+sum)
	}
	if len(parts) == 0 {
		return "unknown"
	}
	return strings.Join(parts, " ")
}

// executableHash is the short hex sha256 of the running binary.
func executableHash() (string, error) {
	path, err := os.Executable()
	if err != nil {
		return "", err
	}
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil))[:12], nil
}
