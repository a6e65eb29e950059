//go:build aix || darwin || dragonfly || freebsd || linux || netbsd || openbsd || solaris

package aguistate

import "syscall"

// ownSession puts a sidecar the client starts in a session of its own (setsid):
// no terminal's or process group's signal meant for the worker reaches it.
func ownSession() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setsid: true} }
