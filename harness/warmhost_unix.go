//go:build unix

package harness

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"syscall"

	"github.com/d10ffeed/corral/sandbox"
)

// LookWarmKeeper reads a keeper directory without a process, where the
// sandbox's files and processes are the host's (a handle with host paths
// and no process table of its own: the local provider), and reports ok
// false elsewhere, or when anything in the directory is not what the
// keeper check writes (a file that is not a regular file, a symlink, an
// unreadable file): the caller then runs its check in the sandbox. It
// looks as the shell check's builtins do (WarmAliveSh): alive is "kill -0
// succeeds and /proc/PID/stat does not say zombie".
func LookWarmKeeper(h sandbox.Handle, dir string) (WarmKeeperFiles, bool) {
	if h == nil || h.Capabilities().OwnProcessTable {
		return WarmKeeperFiles{}, false
	}
	hp, ok := sandbox.HostPath(h, dir)
	if !ok {
		return WarmKeeperFiles{}, false
	}
	k := WarmKeeperFiles{LogSize: -1}
	var pid string
	for _, f := range []struct {
		name string
		to   *string
	}{{"pid", &pid}, {"busy", &k.Busy}, {"digest", &k.Digest}, {"session", &k.Session}} {
		v, ok := readKeeperLine(hp + "/" + f.name)
		if !ok {
			return WarmKeeperFiles{}, false
		}
		*f.to = v
	}
	if pid != "" {
		n, err := strconv.Atoi(pid)
		if err != nil || n <= 0 {
			return WarmKeeperFiles{}, false // the shell check decides what to do with it
		}
		k.PID, k.PIDAlive = n, processAlive(n)
	}
	if k.Busy != "" {
		n, err := strconv.Atoi(k.Busy)
		if err != nil || n <= 0 {
			return WarmKeeperFiles{}, false
		}
		k.BusyAlive = processAlive(n)
	}
	if fi, err := os.Lstat(hp + "/log"); err == nil && fi.Mode().IsRegular() {
		k.LogSize = fi.Size()
	}
	return k, true
}

// readKeeperLine returns the first line of a small regular file, blanks
// trimmed; "" for a missing file; ok false for anything else (a symlink,
// a FIFO the agent made to hold the daemon's read, a read error). The
// agent's uid can write the keeper directory, so the file is opened
// without following a symlink and without blocking on a FIFO, and is
// checked to be a regular file before it is read.
func readKeeperLine(p string) (string, bool) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if errors.Is(err, os.ErrNotExist) {
		return "", true
	}
	if err != nil {
		return "", false
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return "", false
	}
	buf := make([]byte, 4096)
	n, err := f.Read(buf)
	if err != nil && n == 0 && fi.Size() > 0 {
		return "", false
	}
	line := buf[:n]
	if i := bytes.IndexByte(line, '\n'); i >= 0 {
		line = line[:i]
	} else if n == len(buf) {
		return "", false // a line longer than any the check writes
	}
	return string(bytes.Trim(line, " \t")), true
}

// processAlive is WarmAliveSh's alive on the host: kill -0 succeeds (the
// process exists and this uid may signal it) and /proc/PID/stat, where
// there is one, does not say zombie or dead.
func processAlive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true // no /proc: kill -0 decides, as in the shell
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return true
	}
	switch b[i+2] {
	case 'Z', 'X':
		return false
	}
	return true
}
