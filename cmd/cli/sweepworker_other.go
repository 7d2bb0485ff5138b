//go:build !linux

package cli

import "syscall"

// workerAttrs: without Linux's parent-death signal, a worker ends when its stdin closes, which a
// dead sweep's does.
func workerAttrs() *syscall.SysProcAttr { return nil }
