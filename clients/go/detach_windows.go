package aguistate

import "syscall"

// detachedProcess is DETACHED_PROCESS: no console of the worker's.
const detachedProcess = 0x00000008

// ownSession starts a sidecar the client starts in a process group of its own,
// with no console: a Ctrl-C or Ctrl-Break meant for the worker does not reach it.
func ownSession() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{CreationFlags: syscall.CREATE_NEW_PROCESS_GROUP | detachedProcess}
}
