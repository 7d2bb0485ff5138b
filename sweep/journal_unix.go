//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package sweep

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// lockDir takes dir's lock file (flock, exclusive, without waiting) and writes this process's id
// in it, so a second writer is refused by name. The kernel drops the lock when the process dies,
// so a killed sweep leaves nothing to clean up.
func lockDir(dir string) (func() error, error) {
	path := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("sweep: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			pid := "unknown"
			if b, rerr := os.ReadFile(path); rerr == nil {
				if n, perr := strconv.Atoi(string(bytes.TrimSpace(b))); perr == nil {
					pid = strconv.Itoa(n)
				}
			}
			return nil, fmt.Errorf("sweep: another nitro sweep is writing %s (pid %s); wait for it to end, or stop it, before resuming", dir, pid)
		}
		return nil, fmt.Errorf("sweep: locking %s: %w", path, err)
	}
	// The pid is only a hint for the message above; the flock is the lock.
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return func() error {
		// Unlock before close so the lock is gone even if another descriptor of this file exists.
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return err
	}, nil
}
