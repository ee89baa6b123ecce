package local

import (
	"bytes"
	"syscall"
)

// idleAttr is the extended attribute on a sandbox directory that says no
// command has ever started in it. Create sets it on a directory it has just
// made; every corral process removes it before it starts the first command
// in the sandbox (state.markRan), so its presence proves that no process
// carrying the sandbox's marker can exist and Destroy may skip the /proc
// scan. A directory without it (a file system without user xattrs, a
// fixed Options.Dir, a sandbox that ran something) is always scanned.
const idleAttr = "user.corral.idle"

var idleValue = []byte("1")

// markIdle records that nothing has run in dir yet. A failure only costs
// a scan on Destroy.
func markIdle(dir string) {
	_ = syscall.Setxattr(dir, idleAttr, idleValue, 0)
}

// markRan removes the idle mark from dir. It fails only when the mark is
// there and cannot be removed; then no command may start.
func markRan(dir string) error {
	err := syscall.Removexattr(dir, idleAttr)
	switch err {
	case nil, syscall.ENODATA, syscall.ENOTSUP:
		return nil
	}
	if isIdle(dir) {
		return err
	}
	return nil
}

// isIdle reports whether dir carries the idle mark.
func isIdle(dir string) bool {
	buf := make([]byte, len(idleValue)+1)
	n, err := syscall.Getxattr(dir, idleAttr, buf)
	return err == nil && bytes.Equal(buf[:n], idleValue)
}
