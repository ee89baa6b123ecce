package journal_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/d10ffeed/corral/journal"
	"github.com/d10ffeed/corral/provider/local"
	"github.com/d10ffeed/corral/sandbox"
)

// hunter is an agent's helper that reads the memory of its wrapper (the
// agent shell's parent) through /proc/PID/maps and /proc/PID/mem, finds every 32-hex-digit string, and prints a forged
// exit-0 sentinel for each on stdout (the journal). It writes the
// candidates, one a line, to the file named by $1, and "readable" or
// "unreadable" as their first line.
const hunter = `package main

import (
	"bufio"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
)

var hexRE = regexp.MustCompile("[0-9a-f]{32,}")

func ppid(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	p, _ := strconv.Atoi(f[1])
	return p
}

func main() {
	seen := map[string]bool{}
	var order []string
	readable := false
	// Up the ancestors to the wrapper: the process whose argv holds
	// "corral-journal". Its memory alone is read.
	pid := os.Getpid()
	for range 4 {
		pid = ppid(pid)
		if pid <= 1 {
			break
		}
		argv, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if !strings.Contains(string(argv), "\x00corral-journal\x00") {
			continue
		}
		maps, err := os.Open(fmt.Sprintf("/proc/%d/maps", pid))
		if err != nil {
			continue
		}
		mem, err := os.Open(fmt.Sprintf("/proc/%d/mem", pid))
		if err != nil {
			maps.Close()
			continue
		}
		sc := bufio.NewScanner(maps)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) < 2 || f[1][0] != 'r' {
				continue
			}
			lo, hi, _ := strings.Cut(f[0], "-")
			a, _ := strconv.ParseUint(lo, 16, 64)
			b, _ := strconv.ParseUint(hi, 16, 64)
			if b-a > 256<<20 {
				continue
			}
			buf := make([]byte, b-a)
			n, _ := mem.ReadAt(buf, int64(a))
			if n > 0 {
				readable = true
			}
			for _, m := range hexRE.FindAll(buf[:n], -1) {
				if len(m) != 32 || seen[string(m)] {
					continue
				}
				seen[string(m)] = true
				order = append(order, string(m))
			}
		}
		maps.Close()
		mem.Close()
		break
	}
	out := bufio.NewWriter(os.Stdout)
	for _, c := range order {
		fmt.Fprintf(out, "{\"__exit\":0,\"__nonce\":\"%s\"}\n", c)
	}
	out.Flush()
	state := "unreadable"
	if readable {
		state = "readable"
	}
	os.WriteFile(os.Args[1], []byte(state+"\n"+strings.Join(order, "\n")+"\n"), 0o600)
}
`

// TestJournalNonceFromWrapperMemory: an agent really reads the nonce out
// of its wrapper's memory (/proc/$PPID/mem) and writes a forged exit 0
// for every candidate it found, goes on, forges them again and exits 7 at
// once. The run's exit
// is 7, and none of the forged lines reaches the reader.
func TestJournalNonceFromWrapperMemory(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("needs /proc/PID/mem")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go toolchain to build the agent's helper")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "hunter.go")
	bin := filepath.Join(dir, "hunter")
	if err := os.WriteFile(src, []byte(hunter), 0o600); err != nil {
		t.Fatal(err)
	}
	build := exec.Command(gobin, "build", "-o", bin, src)
	build.Dir = dir
	build.Env = append(os.Environ(), "GOFLAGS=")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the helper: %v\n%s", err, out)
	}
	p, err := local.New(local.Options{BaseDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	h, err := p.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Destroy(context.Background()) })
	for _, st := range []journal.Strategy{journal.Poll, journal.Follow} {
		t.Run(string(st), func(t *testing.T) {
			paths, err := journal.PathsFor("", "memattack-"+string(st)+"-"+journal.NewNonce()[:8])
			if err != nil {
				t.Fatal(err)
			}
			nonce := journal.NewNonce()
			found := filepath.Join(dir, "found-"+string(st))
			agent := sandbox.Command{Args: []string{"sh", "-c", `echo before; "$0" "$1"; sleep 0.5; echo after; "$0" "$1"; exit 7`, bin, found}}
			if err := journal.Start(ctx, h, journal.Spec{Paths: paths, Nonce: nonce, Agent: agent}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = journal.Remove(context.Background(), h, paths) })
			var lines []journal.Line
			rd := &journal.Reader{Handle: h, Paths: paths, Nonce: nonce, Strategy: st, PollInterval: 50 * time.Millisecond}
			exit, err := rd.Read(ctx, 0, func(l journal.Line) error {
				lines = append(lines, l)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(found)
			if err != nil {
				t.Fatalf("the helper left no candidates: %v", err)
			}
			cands := strings.Fields(string(b))
			if len(cands) == 0 || cands[0] != "readable" {
				t.Skipf("the wrapper's memory is not readable here (%q): the attack cannot run", cands)
			}
			cands = cands[1:]
			hit := false
			for _, c := range cands {
				hit = hit || c == nonce
			}
			if !hit {
				t.Fatalf("the helper read the wrapper's memory but did not find the nonce among %d candidates", len(cands))
			}
			accepted := 0
			if exit.Code != 7 {
				accepted = 1
			}
			for _, l := range lines {
				if strings.Contains(string(l.Data), nonce) {
					t.Errorf("a forged line was delivered: %q", l.Data)
				}
			}
			// Each candidate is forged twice: while the agent runs on, and as
			// its last act before exiting.
			t.Logf("the nonce was in the wrapper's memory (%d candidates); forged exits accepted: %d of %d attempts", len(cands), accepted, 2*len(cands))
			// A candidate that is not the nonce (another 32-hex string in the
			// wrapper's memory, such as a cgroup id the shell read) makes a
			// line that is plain output, rightly delivered: leave those out.
			var own []journal.Line
			for _, l := range lines {
				forgedOther := false
				for _, c := range cands {
					forgedOther = forgedOther || c != nonce && strings.Contains(string(l.Data), `"__nonce":"`+c+`"`)
				}
				if !forgedOther {
					own = append(own, l)
				}
			}
			if got := strings.Join(texts(own), "|"); exit.Code != 7 || got != "before|after" {
				t.Errorf("exit %d lines %q; want 7 and before|after", exit.Code, got)
			}
		})
	}
}

func texts(lines []journal.Line) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = string(l.Data)
	}
	return out
}
