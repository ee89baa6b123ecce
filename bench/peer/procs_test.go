//go:build peerbench

package peer

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/d10ffeed/corral/internal/testutil"
)

// daemon is one server process of the benchmark, in a process group of
// its own so that the end of the test stops it and whatever it started.
type daemon struct {
	name string
	url  string
	cmd  *exec.Cmd
	log  string
}

// freePort returns a loopback port nobody listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startDaemon starts bin with args and env, its output in a log file in
// dir, and waits until GET url+health answers 200.
func startDaemon(t *testing.T, name, dir, url, health, bin string, args, env []string) *daemon {
	t.Helper()
	logPath := filepath.Join(dir, name+".log")
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		f.Close()
		t.Fatalf("%s: %v", name, err)
	}
	f.Close()
	d := &daemon{name: name, url: url, cmd: cmd, log: logPath}
	pgid := cmd.Process.Pid
	t.Cleanup(func() {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		_, _ = cmd.Process.Wait()
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(url + health)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return d
			}
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(logPath)
			t.Fatalf("%s did not answer %s within 30 s:\n%s", name, url+health, tail(string(b), 2000))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// kill9 SIGKILLs the daemon's own process (not its group: what it
// started lives on, as after a crash) and reaps it.
func (d *daemon) kill9() {
	_ = d.cmd.Process.Signal(syscall.SIGKILL)
	_, _ = d.cmd.Process.Wait()
}

func (d *daemon) logTail() string {
	b, _ := os.ReadFile(d.log)
	return tail(string(b), 3000)
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// rssKB reads VmRSS of pid from /proc, in KiB.
func rssKB(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			n, _ := strconv.Atoi(f[1])
			return n
		}
	}
	return 0
}

// descendants lists the living processes below pid.
func descendants(pid int) []int {
	parent := map[int]int{}
	for _, p := range testutil.Procs() {
		if p.State != "Z" {
			parent[p.Pid] = p.PPid
		}
	}
	var out []int
	for p := range parent {
		for q := parent[p]; q > 1; q = parent[q] {
			if q == pid {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

// treeRSSKB is the VmRSS of pid's descendants (not pid itself).
func treeRSSKB(pid int) (kb, n int) {
	for _, p := range descendants(pid) {
		kb += rssKB(p)
		n++
	}
	return kb, n
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// ms formats a duration in milliseconds with three significant digits.
func ms(d time.Duration) string {
	v := float64(d) / float64(time.Millisecond)
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f ms", v)
	case v >= 10:
		return fmt.Sprintf("%.1f ms", v)
	default:
		return fmt.Sprintf("%.2f ms", v)
	}
}

// withTimeout is a generous hang guard for one measured operation.
func withTimeout() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 3*time.Minute)
}
