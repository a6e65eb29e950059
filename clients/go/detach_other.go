//go:build !(aix || darwin || dragonfly || freebsd || linux || netbsd || openbsd || solaris || windows)

package aguistate

import "syscall"

// ownSession is nil where the system has no sessions to put a process in.
func ownSession() *syscall.SysProcAttr { return nil }
