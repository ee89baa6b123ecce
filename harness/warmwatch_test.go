package harness

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/d10ffeed/corral/internal/testutil"
)

// TestWarmWatch checks watch_keeper (WarmWatchSh) in each POSIX shell
// here: a SIGTERM, as a turn client's end sends, ends the watchdog with
// its sleep (none is left to the journal wrapper's scope kill), and a
// keeper's death makes it kill the pids it was given.
func TestWarmWatch(t *testing.T) {
	for _, sh := range [][]string{{"sh"}, {"dash"}, {"busybox", "sh"}} {
		if _, err := exec.LookPath(sh[0]); err != nil {
			continue
		}
		t.Run(strings.Join(sh, "-"), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			t.Run("terminated", func(t *testing.T) {
				p := startWatch(t, sh, `sleep 600 & k=$!; watch_keeper $k 600; echo "$k $!"`)
				k, w := p[0], p[1]
				var child int
				testutil.WaitFor(t, ctx, "the watchdog's sleep", 10*time.Millisecond, func(context.Context) (bool, error) {
					child = childOf(w)
					return child > 0, nil
				})
				t.Cleanup(func() { _ = syscall.Kill(child, syscall.SIGKILL) })
				if err := syscall.Kill(w, syscall.SIGTERM); err != nil {
					t.Fatal(err)
				}
				testutil.WaitFor(t, ctx, "the watchdog's sleep to end with it", 10*time.Millisecond, func(context.Context) (bool, error) {
					return !livePid(child) && !livePid(w), nil
				})
				if !livePid(k) {
					t.Error("the watchdog's end killed the keeper")
				}
			})
			t.Run("keeper died", func(t *testing.T) {
				p := startWatch(t, sh, `sleep 600 & k=$!; sleep 600 & o=$!; watch_keeper $k 0.05 $o; echo "$k $o $!"`)
				k, o := p[0], p[1]
				if err := syscall.Kill(k, syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
				testutil.WaitFor(t, ctx, "the watchdog to kill the relay once the keeper died", 10*time.Millisecond, func(context.Context) (bool, error) {
					return !livePid(o), nil
				})
			})
		})
	}
}

// startWatch runs script after WarmAliveSh and WarmWatchSh in sh and
// returns the pids its first line prints (killed at the test's end).
func startWatch(t *testing.T, sh []string, script string) []int {
	t.Helper()
	cmd := exec.Command(sh[0], append(sh[1:], "-c", WarmAliveSh+WarmWatchSh+script)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("%v: %v", sh, err)
	}
	var pids []int
	for _, f := range strings.Fields(line) {
		n, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("%v printed %q", sh, line)
		}
		pids = append(pids, n)
	}
	t.Cleanup(func() {
		for _, p := range pids {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		_ = cmd.Wait()
	})
	return pids
}

// livePid reports whether pid runs (a zombie does not).
func livePid(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && !strings.HasPrefix(s[i+1:], " Z") && !strings.HasPrefix(s[i+1:], " X")
}

// childOf returns a live child of pid, or 0.
func childOf(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if err != nil {
		return 0
	}
	for _, f := range strings.Fields(string(b)) {
		if c, err := strconv.Atoi(f); err == nil && livePid(c) {
			return c
		}
	}
	return 0
}
