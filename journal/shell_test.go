package journal

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// shells are the POSIX shells the snippets must work in: the host's sh,
// dash, and BusyBox sh (the Docker test image's), where installed.
func shells(t *testing.T) [][]string {
	t.Helper()
	var out [][]string
	for _, sh := range [][]string{{"sh"}, {"dash"}, {"busybox", "sh"}} {
		if _, err := exec.LookPath(sh[0]); err == nil {
			out = append(out, sh)
		}
	}
	if len(out) == 0 {
		t.Skip("no POSIX shell")
	}
	return out
}

func runSnippet(t *testing.T, sh []string, script string, args ...string) string {
	t.Helper()
	argv := append(append(append([]string{}, sh[1:]...), "-c", script, "snippet"), args...)
	out, err := exec.Command(sh[0], argv...).CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %v: %s", sh, err, out)
	}
	return strings.TrimSpace(string(out))
}

func startTime(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	return f[19]
}

func background(t *testing.T, name string, args ...string) *exec.Cmd {
	t.Helper()
	c := exec.Command(name, args...)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Process.Kill(); _ = c.Wait() })
	return c
}

// TestAliveFn: the wrapper is alive only as the process its start line
// names (same pid, same start time, not a zombie) or as a process running
// its argv; a reused pid, a zombie or a rewritten start line do not fool
// it.
func TestAliveFn(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	dir := t.TempDir()
	// j has a process running its wrapper's argv; nobody runs j2's.
	j, j2 := filepath.Join(dir, "run.ndjson"), filepath.Join(dir, "other.ndjson")
	write := func(path, s string) {
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	live := background(t, "sh", "-c", "while :; do sleep 1; done", "corral-journal", dir, j, "", "", "stdin", "")
	lp := live.Process.Pid
	other := background(t, "sleep", "300")
	op := other.Process.Pid
	// A zombie: a child of the test that it does not reap until cleanup.
	// (A shell's background child is no good: a shell reaps it when it
	// ends before the shell has exec'd, which a loaded machine makes
	// likely.)
	z := exec.Command("true")
	if err := z.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = z.Wait() })
	zp := z.Process.Pid
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", zp))
		if i := bytes.LastIndexByte(b, ')'); i > 0 && b[i+2] == 'Z' {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no zombie: %q", b)
		}
	}
	dead := exec.Command("true")
	_ = dead.Run()
	dp := dead.Process.Pid
	// Until the child has exec'd sh, its argv is the test's.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		argv, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", lp))
		if bytes.Contains(argv, []byte("\x00corral-journal\x00")) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the stand-in wrapper never ran: %q", argv)
		}
	}
	lt, ot := startTime(t, lp), startTime(t, op)

	script := aliveFn + `cj_alive "$1"; echo "$? $cj_wpid $cj_wnew"`
	start := func(pid int, st string) string { return fmt.Sprintf(`{"__start":%d,"__t":%s}`+"\n", pid, st) }
	old := func(pid int) string { return fmt.Sprintf(`{"__start":%d}`+"\n", pid) }
	for _, sh := range shells(t) {
		t.Run(strings.Join(sh, " "), func(t *testing.T) {
			for _, tt := range []struct {
				name, path, journal, want string
			}{
				{"the wrapper, start time matches", j, start(lp, lt) + "x\n", fmt.Sprintf("0 %d 1", lp)},
				{"old form, the wrapper", j, old(lp), fmt.Sprintf("0 %d", lp)},
				{"rewritten to name a dead pid: the wrapper found by its argv", j, start(dp, "1"), fmt.Sprintf("0 %d 1", lp)},
				{"rewritten to name another live process: the wrapper found by its argv", j, start(op, ot), fmt.Sprintf("0 %d 1", lp)},
				{"no start line, the wrapper runs", j, "hello\n", fmt.Sprintf("0 %d", lp)},
				{"a live process that is not the wrapper", j2, start(op, ot), "1  1"},
				{"old form, a live process that is not the wrapper", j2, old(op), "1"},
				{"reused pid: start time differs", j2, start(lp, lt+"1"), "1  1"},
				{"zombie", j2, start(zp, startTime(t, zp)), "1  1"},
				{"no such pid", j2, start(dp, "1"), "1  1"},
				{"old form, gone", j2, old(dp), "1"},
				{"no start line", j2, "hello\n", "1"},
				{"empty", j2, "", "2"},
			} {
				write(tt.path, tt.journal)
				if got := runSnippet(t, sh, script, tt.path); got != tt.want {
					t.Errorf("%s: got %q, want %q", tt.name, got, tt.want)
				}
			}
			if got := runSnippet(t, sh, script, j+".missing"); got != "2" {
				t.Errorf("missing journal: %q", got)
			}
		})
	}
}

// TestSizeAndReadPos: cj_size reads a size without reading the file, and
// cj_readpos a descriptor's offset.
func TestSizeAndReadPos(t *testing.T) {
	if _, err := os.Stat("/proc/self/fdinfo"); err != nil {
		t.Skip("no /proc")
	}
	f := filepath.Join(t.TempDir(), "j")
	if err := os.WriteFile(f, []byte("0123456789\nabc\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, sh := range shells(t) {
		got := runSnippet(t, sh, aliveFn+`cj_size "$1"; cj_size "$1.none"; exec 3<"$1"; read -r x <&3; cj_readpos $$ "$1"`, f)
		if got != "15\n0\n11" {
			t.Errorf("%v: %q", sh, got)
		}
	}
}
