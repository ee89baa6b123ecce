package fakecloud_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/d10ffeed/corral/internal/fakecloud"
)

// waitDead waits (a hang guard, not a verdict on time) for pid to die.
func waitDead(t *testing.T, pid int) bool {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for fakecloud.Alive(pid) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

// tree starts a shell that backgrounds a sleeping grandchild and waits,
// and returns the process and the grandchild's pid.
func tree(t *testing.T, sb *fakecloud.Sandbox) (*fakecloud.Proc, int) {
	t.Helper()
	p, err := sb.Start(fakecloud.Spec{Argv: []string{"sh", "-c", `sleep 300 & echo $!; wait`}})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = io.Copy(io.Discard, p.Stderr()) }()
	line, err := bufio.NewReader(p.Stdout()).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	gpid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || !fakecloud.Alive(gpid) {
		t.Fatalf("grandchild pid %q: %v", line, err)
	}
	return p, gpid
}

// TestKillModes measures what each kill mode reaches: a shell and its
// backgrounded grandchild, and that DeleteSandbox kills a survivor.
func TestKillModes(t *testing.T) {
	for _, tc := range []struct {
		mode          fakecloud.KillMode
		disconnect    bool
		grandchildDie bool
	}{
		{fakecloud.GroupKill, false, true},
		{fakecloud.PIDOnly, false, false},
		{fakecloud.KillOnDisconnect, false, false},
		{fakecloud.KillOnDisconnect, true, true},
	} {
		name := tc.mode.String()
		if tc.disconnect {
			name += "/disconnect"
		}
		t.Run(name, func(t *testing.T) {
			s, err := fakecloud.New(fakecloud.Options{BaseDir: t.TempDir(), Kill: tc.mode})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(s.Close)
			sb, err := s.CreateSandbox("k", nil)
			if err != nil {
				t.Fatal(err)
			}
			p, gpid := tree(t, sb)
			if tc.disconnect {
				p.Disconnected()
			} else if err := p.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			<-p.Done()
			if code := p.ExitCode(); code != 128+9 {
				t.Errorf("leader exit code %d, want 137", code)
			}
			var survived bool
			if tc.grandchildDie {
				survived = !waitDead(t, gpid)
			} else {
				survived = fakecloud.Alive(gpid)
			}
			if survived == tc.grandchildDie {
				t.Fatalf("grandchild survived=%v, want %v", survived, !tc.grandchildDie)
			}
			if _, err := s.DeleteSandbox(context.Background(), sb.ID); err != nil {
				t.Fatal(err)
			}
			left := 0
			if !waitDead(t, gpid) {
				left = 1
			}
			if _, err := os.Stat(sb.Dir); !os.IsNotExist(err) {
				t.Errorf("sandbox directory left: %v", err)
			}
			t.Logf("mode %s: leader exit %d, grandchild survived the kill: %v; after DeleteSandbox %d processes left, directory removed",
				name, p.ExitCode(), survived, left)
			if left != 0 {
				t.Fatal("DeleteSandbox left the grandchild alive")
			}
		})
	}
}

// TestStartEnvAndExit: argv verbatim, the minimal environment with the
// marker, stdin with EOF, 127 for a missing program.
func TestStartEnvAndExit(t *testing.T) {
	s, err := fakecloud.New(fakecloud.Options{BaseDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	sb, _ := s.CreateSandbox("", nil)
	p, err := sb.Start(fakecloud.Spec{Argv: []string{"sh", "-c", `cat; echo "$FOO|$CORRAL_SANDBOX_ID|$(pwd)"; env | wc -l >&2; exit 3`},
		Env: []string{"FOO=bar", "CORRAL_SANDBOX_ID=forged"}, Stdin: true})
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan string, 1)
	go func() { b, _ := io.ReadAll(p.Stderr()); errc <- string(b) }()
	_, _ = p.WriteStdin([]byte("in\n"))
	p.CloseStdin()
	out, _ := io.ReadAll(p.Stdout())
	<-p.Done()
	want := "in\nbar|" + sb.Dir + "|" + sb.Root + "\n"
	if string(out) != want || p.ExitCode() != 3 {
		t.Errorf("got %q exit %d, want %q exit 3", out, p.ExitCode(), want)
	}
	nvars := strings.TrimSpace(<-errc)
	t.Logf("stdout %q, exit %d, %s variables in the environment", out, p.ExitCode(), nvars)

	p, err = sb.Start(fakecloud.Spec{Argv: []string{"no-such-program-xyz"}})
	if err != nil {
		t.Fatal(err)
	}
	<-p.Done()
	if p.ExitCode() != 127 {
		t.Errorf("missing program: exit %d, want 127", p.ExitCode())
	}
}

// TestFaultsAndAuth: the token check, request ids, a bounded status burst
// with Retry-After, accept-then-status.
func TestFaultsAndAuth(t *testing.T) {
	s, err := fakecloud.New(fakecloud.Options{BaseDir: t.TempDir(), Token: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	made := 0
	s.Handle("make", "POST /make", func(w http.ResponseWriter, r *http.Request) {
		made++
		fakecloud.WriteJSON(w, http.StatusCreated, map[string]int{"n": made})
	})
	call := func(token string) *http.Response {
		req, _ := http.NewRequest(http.MethodPost, s.URL()+"/make", strings.NewReader("{}"))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := s.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	if r := call(""); r.StatusCode != http.StatusUnauthorized || r.Header.Get(fakecloud.RequestIDHeader) == "" {
		t.Errorf("no token: %d, request id %q", r.StatusCode, r.Header.Get(fakecloud.RequestIDHeader))
	}
	burst := s.Inject("make", fakecloud.Fault{Status: 429, RetryAfter: "3", Times: 2})
	accepted := s.Inject("make", fakecloud.Fault{Status: 504, Accept: true})
	var got []string
	for range 4 {
		r := call("tok")
		got = append(got, strconv.Itoa(r.StatusCode)+"/"+r.Header.Get("Retry-After"))
	}
	want := "429/3 429/3 504/ 201/"
	if strings.Join(got, " ") != want || burst.Hits() != 2 || accepted.Hits() != 1 || made != 2 {
		t.Errorf("answers %v (want %s), burst hits %d, accepted hits %d, handled %d (want 2)", got, want, burst.Hits(), accepted.Hits(), made)
	}
	t.Logf("answers %v; route count %d; handler ran %d times (one behind the 504)", got, s.Count("make"), made)
}
