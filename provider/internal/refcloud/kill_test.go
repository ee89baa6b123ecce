package refcloud_test

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/d10ffeed/corral/internal/fakecloud"
	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/provider/internal/refcloud"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/sandbox/sandboxtest"
)

// TestKillStrategies kills a shell with a backgrounded grandchild through
// the provider, against a backend whose native kill reaches one pid (as
// E2B's envd): execproc.PIDOnly over the signal endpoint leaves the
// grandchild alive, execproc's group kill (a kill script run as a second
// command) does not. Destroy kills the survivor.
func TestKillStrategies(t *testing.T) {
	for _, tc := range []struct {
		name     string
		kill     refcloud.KillStrategy
		survives bool
	}{
		{"native-pid", refcloud.KillNativePID, true},
		{"group", refcloud.KillGroup, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testutil.HangGuard(t)
			s := newFake(t, fakecloud.PIDOnly)
			p, _ := newProvider(t, s, refcloud.Options{Kill: tc.kill, KillGrace: 200 * time.Millisecond})
			if p.Capabilities().KillableProcesses == tc.survives {
				t.Fatalf("killableProcesses=%v with the %s kill", p.Capabilities().KillableProcesses, tc.name)
			}
			h := create(t, ctx, p, sandbox.CreateOptions{})
			pr, err := h.Spawn(ctx, sandbox.Command{Shell: `sleep 300 & echo $!; wait`})
			if err != nil {
				t.Fatal(err)
			}
			go func() { _, _ = io.Copy(io.Discard, pr.Stderr()) }()
			line, err := bufio.NewReader(pr.Stdout()).ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			gpid, _ := strconv.Atoi(strings.TrimSpace(line))
			if !fakecloud.Alive(gpid) {
				t.Fatalf("grandchild %q is not running", line)
			}
			if err := pr.Kill(ctx, 0); err != nil {
				t.Fatalf("Kill: %v", err)
			}
			leader := fakecloud.Alive(pr.PID())
			survived := fakecloud.Alive(gpid)
			if err := h.Destroy(ctx); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(20 * time.Second) // hang guard
			for fakecloud.Alive(gpid) && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			left := 0
			if fakecloud.Alive(gpid) {
				left = 1
			}
			t.Logf("%s kill on a pid-only backend: leader alive after Kill %v, backgrounded grandchild survived %v; after Destroy %d left (killableProcesses=%v)",
				tc.name, leader, survived, left, p.Capabilities().KillableProcesses)
			if leader || survived != tc.survives || left != 0 {
				t.Fatalf("leader alive %v, grandchild survived %v (want %v), left after Destroy %d", leader, survived, tc.survives, left)
			}
		})
	}
}

// liar claims killableProcesses for a provider whose kill is pid-only.
type liar struct{ *refcloud.Provider }

func (l liar) Capabilities() sandbox.Capabilities {
	c := l.Provider.Capabilities()
	c.KillableProcesses = true
	return c
}

const liarEnv = "REFCLOUD_TEST_LIAR"

// TestPIDOnlyClaimFailsKillMeasured runs sandboxtest's KillMeasured case
// in a child test process against the pid-only kill falsely claiming
// killableProcesses, and checks that the case fails, naming the surviving
// grandchild. (The child is this test binary; a failing *testing.T cannot
// be contained in-process.)
func TestPIDOnlyClaimFailsKillMeasured(t *testing.T) {
	if os.Getenv(liarEnv) == "1" {
		p, _ := newProvider(t, newFake(t, fakecloud.PIDOnly), refcloud.Options{Kill: refcloud.KillNativePID, KillGrace: 200 * time.Millisecond})
		sandboxtest.Run(t, sandboxtest.Harness{Provider: liar{p}})
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestPIDOnlyClaimFailsKillMeasured$/^KillMeasured$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), liarEnv+"=1")
	out, err := cmd.CombinedOutput()
	const want = "claims killableProcesses, but the backgrounded grandchild kept writing"
	var verdict string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, want) {
			verdict = strings.TrimSpace(l)
		}
	}
	t.Logf("child run of KillMeasured with a false claim: exit %v; %s", err, verdict)
	if err == nil || verdict == "" {
		t.Fatalf("KillMeasured did not catch the false claim (err %v):\n%s", err, out)
	}
}

// TestKillOnDisconnect: the exec socket of a spawned tree drops in the
// middle of its output. A kill-on-disconnect backend kills the whole
// group; a group-kill backend lets it run (the journal relies on that).
func TestKillOnDisconnect(t *testing.T) {
	for _, tc := range []struct {
		mode     fakecloud.KillMode
		survives bool
	}{
		{fakecloud.KillOnDisconnect, false},
		{fakecloud.GroupKill, true},
	} {
		t.Run(tc.mode.String(), func(t *testing.T) {
			ctx := testutil.HangGuard(t)
			s := newFake(t, tc.mode)
			p, _ := newProvider(t, s, refcloud.Options{})
			h := create(t, ctx, p, sandbox.CreateOptions{})
			f := s.Inject("exec", fakecloud.Fault{DropAfter: 64 << 10})
			pr, err := h.Spawn(ctx, sandbox.Command{Shell: `sleep 300 & echo $!; head -c 1048576 /dev/zero; wait`})
			if err != nil {
				t.Fatal(err)
			}
			go func() { _, _ = io.Copy(io.Discard, pr.Stderr()) }()
			out := bufio.NewReader(pr.Stdout())
			line, err := out.ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			gpid, _ := strconv.Atoi(strings.TrimSpace(line))
			n, rerr := io.Copy(io.Discard, out)          // ends when the socket drops
			deadline := time.Now().Add(20 * time.Second) // hang guard
			for !tc.survives && fakecloud.Alive(gpid) && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			survived := fakecloud.Alive(gpid)
			t.Logf("%s: stream dropped after %d bytes read (%v; %d dropped by the fault); backgrounded grandchild survived the disconnect: %v",
				tc.mode, n+int64(len(line)), rerr, f.Drops(), survived)
			if f.Drops() != 1 || rerr == nil || survived != tc.survives {
				t.Fatalf("drops %d, read error %v, survived %v (want %v)", f.Drops(), rerr, survived, tc.survives)
			}
		})
	}
}
