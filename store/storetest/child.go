package storetest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/d10ffeed/corral/store"
)

// The environment a child lock holder is started with.
const (
	envChild     = "CORRAL_STORETEST_CHILD" // "lock" marks a child
	envChildSpec = "CORRAL_STORETEST_SPEC"
	envChildLock = "CORRAL_STORETEST_LOCK"
	envChildTTL  = "CORRAL_STORETEST_TTL"
)

// OpenFunc opens a store on the database a Backend's ChildSpec names.
type OpenFunc func(ctx context.Context, spec string) (store.Store, error)

// Main is the TestMain of an implementation's test package: in a child
// started by a cross-process case it holds a lock and exits without running
// tests; otherwise it runs the tests. open reaches the database named by a
// Backend's ChildSpec.
func Main(m *testing.M, open OpenFunc) {
	if os.Getenv(envChild) == "lock" {
		os.Exit(runChild(open))
	}
	os.Exit(m.Run())
}

// runChild takes the lock, prints "locked <token>", then waits for
// "release" on stdin (or stdin's end), releases, prints "released" and
// exits. If the lease is lost it prints "lost".
func runChild(open OpenFunc) int {
	fail := func(format string, args ...any) int {
		fmt.Printf("error "+format+"\n", args...)
		return 2
	}
	ttl, err := time.ParseDuration(os.Getenv(envChildTTL))
	if err != nil {
		return fail("bad %s: %v", envChildTTL, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := open(ctx, os.Getenv(envChildSpec))
	if err != nil {
		return fail("open: %v", err)
	}
	defer s.Close()
	l, err := s.Lock(ctx, os.Getenv(envChildLock), ttl)
	if err != nil {
		return fail("lock: %v", err)
	}
	fmt.Printf("locked %d\n", l.Token())
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	for {
		select {
		case <-l.Lost():
			fmt.Println("lost")
			return 0
		case line, ok := <-lines:
			if !ok || line == "release" {
				if err := l.Release(context.Background()); err != nil {
					return fail("release: %v", err)
				}
				fmt.Println("released")
				return 0
			}
		}
	}
}

// child is a lock-holding child process seen from the test.
type child struct {
	t     *testing.T
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
	exit  chan error
}

// startChild starts the test binary as a child that locks name with ttl on
// the database spec names.
func startChild(t *testing.T, spec, name string, ttl time.Duration) *child {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatalf("finding the test binary: %v", err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(),
		envChild+"=lock", envChildSpec+"="+spec, envChildLock+"="+name, envChildTTL+"="+ttl.String())
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting the child: %v", err)
	}
	c := &child{t: t, cmd: cmd, stdin: stdin, lines: make(chan string, 16), exit: make(chan error, 1)}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
		c.exit <- cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = stdin.Close()
		for range c.lines {
		}
	})
	return c
}

// expect waits for the child's next line, which must start with word, and
// returns the rest.
func (c *child) expect(word string, timeout time.Duration) string {
	c.t.Helper()
	select {
	case line, ok := <-c.lines:
		if !ok {
			c.t.Fatalf("child exited (%v) before printing %q; does the test's TestMain call storetest.Main?", <-c.exit, word)
		}
		rest, found := strings.CutPrefix(line, word)
		if !found {
			c.t.Fatalf("child printed %q, want %q", line, word)
		}
		return strings.TrimSpace(rest)
	case <-time.After(timeout):
		c.t.Fatalf("child printed no %q within %v", word, timeout)
	}
	return ""
}

// quiet fails if the child prints anything within d.
func (c *child) quiet(d time.Duration, why string) {
	c.t.Helper()
	select {
	case line, ok := <-c.lines:
		if ok {
			c.t.Fatalf("child printed %q: %s", line, why)
		}
		c.t.Fatalf("child exited early (%v): %s", <-c.exit, why)
	case <-time.After(d):
	}
}

func (c *child) token(rest string) int64 {
	c.t.Helper()
	n, err := strconv.ParseInt(rest, 10, 64)
	if err != nil {
		c.t.Fatalf("child printed token %q: %v", rest, err)
	}
	return n
}

func (c *child) send(line string) {
	c.t.Helper()
	if _, err := io.WriteString(c.stdin, line+"\n"); err != nil {
		c.t.Fatalf("writing to the child: %v", err)
	}
}

// kill kills the child (SIGKILL: no deferred release, no goodbye) and waits
// for it to be gone.
func (c *child) kill() {
	c.t.Helper()
	if err := c.cmd.Process.Kill(); err != nil {
		c.t.Fatalf("killing the child: %v", err)
	}
	for range c.lines {
	}
	<-c.exit
}
