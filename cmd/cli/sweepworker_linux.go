package cli

import "syscall"

// workerAttrs kill a worker with the sweep's process: a kill -9 of the sweep leaves no trial
// training unrecorded in the background.
func workerAttrs() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
