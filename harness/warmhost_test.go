//go:build linux

package harness_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/harness/harnesstest"
)

// TestLookWarmKeeper: on the local provider the keeper directory is read
// with os calls, as the shell check's builtins read it (first line,
// blanks trimmed; a missing file is empty), and the pids are judged alive
// as WarmAliveSh does (a zombie is dead); the session log's size is read
// without following a symlink. Whatever the check does not
// write — a symlink, a FIFO (which must not block the read), a pid that
// is not a number, an over-long line — sends the caller to the shell
// check (ok false).
func TestLookWarmKeeper(t *testing.T) {
	_, h := harnesstest.CaptureSandbox(t)
	// A zombie: a child this process does not reap until the test ends.
	zombie := exec.Command("true")
	if err := zombie.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = zombie.Wait() })
	// Until the child has exited, left unreaped (WNOWAIT): a zombie.
	var info unix.Siginfo
	if err := unix.Waitid(unix.P_PID, zombie.Process.Pid, &info, unix.WEXITED|unix.WNOWAIT, nil); err != nil {
		t.Fatal(err)
	}
	self := strconv.Itoa(os.Getpid())
	tests := []struct {
		name  string
		files map[string]string // name -> content; "->" prefix: a symlink to it; "|": a FIFO
		ok    bool
		want  harness.WarmKeeperFiles
	}{
		{"empty directory", nil, true, harness.WarmKeeperFiles{LogSize: -1}},
		{"session log", map[string]string{"log": "0123456789"}, true, harness.WarmKeeperFiles{LogSize: 10}},
		{"symlinked log", map[string]string{"log": "->/etc/passwd"}, true, harness.WarmKeeperFiles{LogSize: -1}},
		{"warm", map[string]string{"pid": self + "\n", "digest": "  abc123 \n", "session": "ses-1\nmore\n"}, true,
			harness.WarmKeeperFiles{PID: os.Getpid(), PIDAlive: true, Digest: "abc123", Session: "ses-1", LogSize: -1}},
		{"busy", map[string]string{"pid": self, "busy": self}, true,
			harness.WarmKeeperFiles{PID: os.Getpid(), PIDAlive: true, Busy: self, BusyAlive: true, LogSize: -1}},
		{"zombie keeper", map[string]string{"pid": strconv.Itoa(zombie.Process.Pid)}, true,
			harness.WarmKeeperFiles{PID: zombie.Process.Pid, LogSize: -1}},
		{"gone keeper", map[string]string{"pid": "999999999"}, true, harness.WarmKeeperFiles{PID: 999999999, LogSize: -1}},
		{"pid not a number", map[string]string{"pid": "12 34"}, false, harness.WarmKeeperFiles{}},
		{"negative pid", map[string]string{"pid": "-1"}, false, harness.WarmKeeperFiles{}},
		{"busy not a number", map[string]string{"pid": self, "busy": "x"}, false, harness.WarmKeeperFiles{}},
		{"symlinked pid", map[string]string{"pid": "->/proc/self/stat"}, false, harness.WarmKeeperFiles{}},
		{"FIFO digest", map[string]string{"pid": self, "digest": "|"}, false, harness.WarmKeeperFiles{}},
		{"over-long line", map[string]string{"pid": self, "session": string(make([]byte, 5000))}, false, harness.WarmKeeperFiles{}},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(h.WorkspaceRoot(), "keeper-"+strconv.Itoa(i))
			if err := os.MkdirAll(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			for name, content := range tc.files {
				p := filepath.Join(dir, name)
				var err error
				switch {
				case len(content) > 2 && content[:2] == "->":
					err = os.Symlink(content[2:], p)
				case content == "|":
					err = syscall.Mkfifo(p, 0o600)
				default:
					err = os.WriteFile(p, []byte(content), 0o600)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			got, ok := harness.LookWarmKeeper(h, dir)
			if ok != tc.ok {
				t.Fatalf("ok = %v, want %v (%+v)", ok, tc.ok, got)
			}
			if ok && got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
	// A handle whose files are not the host's: always the shell check.
	if _, ok := harness.LookWarmKeeper(nil, h.WorkspaceRoot()); ok {
		t.Fatal("a nil handle was read on the host")
	}
}
