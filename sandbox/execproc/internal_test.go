package execproc

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"
)

func TestCtlWriter(t *testing.T) {
	for _, tc := range []struct {
		name   string
		writes []string
		line   string
		rest   string
	}{
		{"one write", []string{"P12\nerr\n"}, "P12", "err\n"},
		{"split", []string{"P", "1", "2\ne", "rr"}, "P12", "err"},
		{"only the line", []string{"P7\n"}, "P7", ""},
		{"no newline at end", []string{"P7"}, "P7", ""},
		{"not a control line", []string{"OCI runtime exec failed: something long\n"}, "", "OCI runtime exec failed: something long\n"},
		{"escape", []string{"X\n"}, "X", ""},
	} {
		var out bytes.Buffer
		var got []string
		c := &ctlWriter{w: &out, on: func(s string) { got = append(got, s) }}
		for _, w := range tc.writes {
			if n, err := c.Write([]byte(w)); err != nil || n != len(w) {
				t.Fatalf("%s: Write = %d, %v", tc.name, n, err)
			}
		}
		c.finish()
		line := tc.line
		if tc.name == "no newline at end" {
			// The stream ended inside the line: it is passed on as output.
			line, tc.rest = "", "P7"
		}
		if len(got) != 1 || got[0] != line || out.String() != tc.rest {
			t.Errorf("%s: control %q, rest %q; want %q, %q", tc.name, got, out.String(), line, tc.rest)
		}
	}
}

func TestCapBuf(t *testing.T) {
	c := &capBuf{limit: 5}
	for _, w := range []string{"abc", "def", "gh"} {
		if n, _ := c.Write([]byte(w)); n != len(w) {
			t.Fatalf("Write returned %d", n)
		}
	}
	if c.buf.String() != "abcde" || !c.truncated {
		t.Errorf("capBuf = %q truncated %v", c.buf.String(), c.truncated)
	}
}

// TestBufPipeBounded runs in a synctest bubble: synctest.Wait returns once
// the writer is blocked for good, so "it waits" and "a read frees it" are
// exact, not guesses over a 100ms window.
func TestBufPipeBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBufPipe()
		b.limit = 8
		wrote := make(chan struct{})
		go func() {
			_, _ = b.Write([]byte("12345678")) // fills it
			_, _ = b.Write([]byte("9"))        // waits for a read
			close(wrote)
		}()
		synctest.Wait()
		select {
		case <-wrote:
			t.Fatal("a write past the limit did not wait for the reader")
		default:
		}
		buf := make([]byte, 4)
		if n, _ := b.Read(buf); string(buf[:n]) != "1234" {
			t.Fatalf("read %q", buf[:n])
		}
		synctest.Wait()
		select {
		case <-wrote:
		default:
			t.Fatal("a read did not make room for the writer")
		}

		// Close: the writer no longer waits, and what it writes is dropped.
		c := newBufPipe()
		c.limit = 1
		_, _ = c.Write([]byte("x"))
		done := make(chan struct{})
		go func() {
			_, _ = c.Write([]byte("y"))
			close(done)
		}()
		synctest.Wait()
		_ = c.Close()
		synctest.Wait()
		select {
		case <-done:
		default:
			t.Fatal("Close did not release the writer")
		}
		if n, err := c.Write([]byte("zz")); n != 2 || err != nil {
			t.Errorf("write after Close = %d, %v", n, err)
		}
		c.closeWithError(nil)
		if _, err := c.Read(buf); err == nil {
			t.Error("a read after Close must fail")
		}
	})
}

// TestKillScriptZombieIsNotAlive: a group whose only member left is a
// zombie (an orphan its reaper has not got to yet) is gone for the kill
// script: "ok", where counting the zombie made it wait out its checks and
// report "survived".
func TestKillScriptZombieIsNotAlive(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	leader := exec.Command("sleep", "1000")
	leader.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := leader.Start(); err != nil {
		t.Fatal(err)
	}
	reaped := make(chan struct{})
	go func() { _ = leader.Wait(); close(reaped) }()
	t.Cleanup(func() { _ = leader.Process.Kill(); <-reaped })
	pg := leader.Process.Pid
	// A member of the group that exits and that the test does not reap
	// until cleanup: a zombie in the group.
	z := exec.Command("true")
	z.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pgid: pg}
	if err := z.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = z.Wait() })
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", z.Process.Pid))
		if i := bytes.LastIndexByte(b, ')'); i > 0 && b[i+2] == 'Z' {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no zombie")
		}
	}
	for _, tc := range []struct {
		sig  syscall.Signal
		want string
	}{{syscall.SIGTERM, "ok"}, {syscall.SIGKILL, "ok"}} {
		out, err := exec.Command("sh", "-c", killScript, "sh", strconv.Itoa(pg), strconv.Itoa(int(tc.sig)), "100").Output()
		if err != nil {
			t.Fatal(err)
		}
		if tc.sig == syscall.SIGTERM {
			<-reaped // the leader is gone: the zombie is all that is left of the group
		}
		if got := strings.TrimSpace(string(out)); got != tc.want {
			t.Errorf("signal %d: %q, want %q", tc.sig, got, tc.want)
		}
	}
}
