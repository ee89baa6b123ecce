package upstashbox

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// runFollower runs followScript with the host's sh on dir from offset 0,
// bounded by a hang guard (which decides nothing but a hang).
func runFollower(t *testing.T, dir string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", followScript, "sh", dir, "0", "0", strconv.Itoa(followBudget), "keep")
	out, err := cmd.Output()
	if ctx.Err() != nil {
		t.Fatalf("the follower never ended (%d bytes sent)", len(out))
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return string(out), cmd.ProcessState.ExitCode()
}

// TestFollowerWithoutWaiter: a follower whose waiter is not running and
// left no exit code ends with 137 once it sent the output, whether the
// waiter's pid file holds a dead pid or is missing (a launcher killed
// before it recorded the waiter). The old follower waited for the pid
// file forever: journaltest follow/FollowerShellKilled hung with 0 of 501
// lines once.
func TestFollowerWithoutWaiter(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Fatal(err)
	}
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	for name, pid := range map[string]string{"missing pid file": "", "dead waiter": strconv.Itoa(dead.Process.Pid)} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "o"), []byte("partial output\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			if pid != "" {
				if err := os.WriteFile(filepath.Join(dir, "w"), []byte(pid+"\n"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			out, code := runFollower(t, dir)
			t.Logf("%s: follower sent %q, exit %d", name, out, code)
			if out != "partial output\n" || code != 137 {
				t.Errorf("sent %q exit %d, want the output and 137", out, code)
			}
		})
	}
	t.Run("live waiter", func(t *testing.T) {
		dir := t.TempDir()
		live := exec.Command("sleep", "30")
		if err := live.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = live.Process.Kill(); _ = live.Wait() })
		if err := os.WriteFile(filepath.Join(dir, "w"), []byte(strconv.Itoa(live.Process.Pid)+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		go func() {
			time.Sleep(300 * time.Millisecond) // only delays the code; the verdict is the code
			_ = os.WriteFile(filepath.Join(dir, "o"), []byte("done\n"), 0o600)
			_ = os.WriteFile(filepath.Join(dir, "x"), []byte("7\n"), 0o600)
		}()
		out, code := runFollower(t, dir)
		t.Logf("live waiter: follower sent %q, exit %d", out, code)
		if out != "done\n" || code != 7 {
			t.Errorf("sent %q exit %d, want done and 7", out, code)
		}
	})
}
