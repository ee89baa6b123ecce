//go:build linux

package local

import (
	"os"

	"golang.org/x/sys/unix"
)

// pending returns how many bytes wait unread in the pipe f (FIONREAD, which Linux names TIOCINQ), or
// 0 when that cannot be told.
func pending(f *os.File) int {
	if f == nil {
		return 0
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return 0
	}
	n := 0
	_ = rc.Control(func(fd uintptr) {
		if v, err := unix.IoctlGetInt(int(fd), unix.TIOCINQ); err == nil {
			n = v
		}
	})
	return n
}
