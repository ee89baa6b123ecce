package refcloud_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/d10ffeed/corral/internal/fakecloud"
	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/journal"
	"github.com/d10ffeed/corral/provider/internal/refcloud"
	"github.com/d10ffeed/corral/sandbox"
)

func create(t *testing.T, ctx context.Context, p *refcloud.Provider, opts sandbox.CreateOptions) sandbox.Handle {
	t.Helper()
	h, err := p.Create(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Destroy(context.Background()) })
	return h
}

// TestLookup429Burst: a burst of 429s with Retry-After on an idempotent
// lookup (Resume's GET) is waited out exactly as the backend asked, and
// the lookup succeeds.
func TestLookup429Burst(t *testing.T) {
	ctx := testutil.HangGuard(t)
	s := newFake(t, fakecloud.GroupKill)
	p, sl := newProvider(t, s, refcloud.Options{})
	h := create(t, ctx, p, sandbox.CreateOptions{})
	burst := s.Inject("get", fakecloud.Fault{Status: 429, RetryAfter: "7", Times: 3})
	before := s.Count("get")
	r, err := p.Resume(ctx, h.ID())
	if err != nil {
		t.Fatalf("Resume after a 429 burst: %v", err)
	}
	pauses := sl.All()
	t.Logf("429 burst: %d refused, %d GETs sent, pauses asked for %v, resumed %s", burst.Hits(), s.Count("get")-before, pauses, r.ID())
	if burst.Hits() != 3 || s.Count("get")-before != 4 || len(pauses) != 3 {
		t.Fatalf("hits %d, GETs %d, pauses %v; want 3, 4, three pauses", burst.Hits(), s.Count("get")-before, pauses)
	}
	for _, d := range pauses {
		if d != 7*time.Second {
			t.Errorf("pause %v, want exactly the Retry-After of 7s", d)
		}
	}
}

// Test5xx: a 503 on an idempotent call is retried; on a create it is not
// simply repeated: the name is looked up first, and only a create that
// did not happen is sent again.
func Test5xx(t *testing.T) {
	ctx := testutil.HangGuard(t)
	s := newFake(t, fakecloud.GroupKill)
	p, _ := newProvider(t, s, refcloud.Options{})
	h := create(t, ctx, p, sandbox.CreateOptions{})

	f := s.Inject("get", fakecloud.Fault{Status: 503, Times: 2})
	before := s.Count("get")
	if _, err := p.Resume(ctx, h.ID()); err != nil {
		t.Fatalf("Resume after two 503s: %v", err)
	}
	t.Logf("idempotent GET: %d answered 503, %d sent, success", f.Hits(), s.Count("get")-before)
	if s.Count("get")-before != 3 {
		t.Errorf("GETs sent %d, want 3", s.Count("get")-before)
	}

	f = s.Inject("create", fakecloud.Fault{Status: 503})
	creates, lists := s.Count("create"), s.Count("list")
	h2 := create(t, ctx, p, sandbox.CreateOptions{ID: "five-hundred"})
	creates, lists = s.Count("create")-creates, s.Count("list")-lists
	n := len(s.Sandboxes("five-hundred", nil))
	t.Logf("create answered 503 (not made): %d creates sent, %d lookups by name before the second, %d sandbox named five-hundred (%s)", creates, lists, n, h2.ID())
	if creates != 2 || lists != 1 || n != 1 {
		t.Errorf("creates %d, lookups %d, sandboxes %d; want 2, 1, 1", creates, lists, n)
	}

	// A non-idempotent create refused for good (a 400-class status) is
	// final: no lookup, no second try.
	f = s.Inject("create", fakecloud.Fault{Status: 422})
	creates, lists = s.Count("create"), s.Count("list")
	_, err := p.Create(ctx, sandbox.CreateOptions{ID: "refused"})
	if sandbox.CodeOf(err) != sandbox.InvalidArgument || s.Count("create")-creates != 1 || s.Count("list") != lists {
		t.Errorf("422 create: %v, %d sent, %d lookups", err, s.Count("create")-creates, s.Count("list")-lists)
	}
	t.Logf("create answered 422: %d sent, error %v", s.Count("create")-creates, err)
}

// TestCreateAcceptedThen504: the backend makes the sandbox and answers
// 504. The provider reconciles by name: exactly one sandbox exists, no
// second create is sent, and Destroy leaves none.
func TestCreateAcceptedThen504(t *testing.T) {
	ctx := testutil.HangGuard(t)
	s := newFake(t, fakecloud.GroupKill)
	p, _ := newProvider(t, s, refcloud.Options{})
	f := s.Inject("create", fakecloud.Fault{Status: 504, Accept: true})
	h, err := p.Create(ctx, sandbox.CreateOptions{ID: "key-504", Labels: map[string]string{"thread": "t1"}})
	if err != nil {
		t.Fatalf("Create after an accepted 504: %v", err)
	}
	all := s.Sandboxes("", nil)
	t.Logf("create accepted then 504: %d create sent (%d hit), %d lookup, %d sandboxes on the fake, handle %s",
		s.Count("create"), f.Hits(), s.Count("list"), len(all), h.ID())
	if len(all) != 1 || all[0].ID != h.ID() || s.Count("create") != 1 || s.Count("list") != 1 {
		t.Fatalf("sandboxes %d (want 1, the handle's), creates %d, lookups %d", len(all), s.Count("create"), s.Count("list"))
	}
	if res, err := h.Exec(ctx, sandbox.Command{Args: []string{"pwd"}}); err != nil || strings.TrimSpace(string(res.Stdout)) != h.WorkspaceRoot() {
		t.Fatalf("exec in the reconciled sandbox: %v", err)
	}
	dir := all[0].Dir
	if err := h.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	_, statErr := os.Stat(dir)
	t.Logf("after Destroy: %d sandboxes, directory removed: %v", len(s.Sandboxes("", nil)), os.IsNotExist(statErr))
	if len(s.Sandboxes("", nil)) != 0 || !os.IsNotExist(statErr) {
		t.Fatal("a sandbox leaked")
	}
}

// TestExecStreamDropped: the socket drops in the middle of an Exec's
// output: a clear Unavailable error, no hang; the next Exec works.
func TestExecStreamDropped(t *testing.T) {
	ctx := testutil.HangGuard(t)
	s := newFake(t, fakecloud.GroupKill)
	p, _ := newProvider(t, s, refcloud.Options{})
	h := create(t, ctx, p, sandbox.CreateOptions{})
	f := s.Inject("exec", fakecloud.Fault{DropAfter: 100 << 10})
	began := time.Now()
	res, err := h.Exec(ctx, sandbox.Command{Shell: `head -c 1048576 /dev/zero`})
	t.Logf("dropped after 100 KiB of 1 MiB: error %v (code %v, after %v), streams dropped %d", err, sandbox.CodeOf(err), time.Since(began).Round(time.Millisecond), f.Drops())
	if err == nil {
		t.Fatalf("Exec succeeded with %d bytes", len(res.Stdout))
	}
	if sandbox.CodeOf(err) != sandbox.Unavailable || !strings.Contains(err.Error(), "dropped after") || f.Drops() != 1 {
		t.Fatalf("want an Unavailable error saying the stream dropped, got %v", err)
	}
	res, err = h.Exec(ctx, sandbox.Command{Shell: `head -c 1048576 /dev/zero`})
	if err != nil || len(res.Stdout) != 1<<20 {
		t.Fatalf("the next Exec: %v", err)
	}
}

// TestJournaledRunSurvivesDrops: the exec streams a journal reader uses
// (the follower, then polls) drop in the middle; the reader replaces them
// and every line arrives exactly once, in order, and a second reader
// attached at an offset gets exactly the rest.
func TestJournaledRunSurvivesDrops(t *testing.T) {
	ctx := testutil.HangGuard(t)
	s := newFake(t, fakecloud.GroupKill)
	p, _ := newProvider(t, s, refcloud.Options{})
	h := create(t, ctx, p, sandbox.CreateOptions{})
	paths, err := journal.PathsFor("", fmt.Sprintf("refcloud-drop-%d", time.Now().UnixNano()))
	if err != nil {
		t.Fatal(err)
	}
	nonce := journal.NewNonce()
	const lines = 3000
	script := fmt.Sprintf(`i=0; while [ $i -lt %d ]; do echo "line $i of the run, padded to make the journal larger than one stream's budget"; i=$((i+1)); done`, lines)
	if err := journal.Start(ctx, h, journal.Spec{Paths: paths, Nonce: nonce, Agent: sandbox.Command{Shell: script}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = journal.Remove(context.Background(), h, paths) })
	f := s.Inject("exec", fakecloud.Fault{DropAfter: 16 << 10, Times: 6})
	read := func(from int64) ([]journal.Line, journal.Exit) {
		r := &journal.Reader{Handle: h, Paths: paths, Nonce: nonce, Strategy: journal.Follow, PollInterval: 50 * time.Millisecond}
		var got []journal.Line
		exit, err := r.Read(ctx, from, func(l journal.Line) error {
			got = append(got, l)
			return nil
		})
		if err != nil {
			t.Fatalf("Read from %d: %v", from, err)
		}
		return got, exit
	}
	check := func(got []journal.Line, first int) {
		t.Helper()
		if len(got) != lines-first {
			t.Fatalf("got %d lines, want %d", len(got), lines-first)
		}
		for i, l := range got {
			if want := fmt.Sprintf("line %d of", first+i); !strings.HasPrefix(string(l.Data), want) {
				t.Fatalf("line %d is %q, want %q…", i, l.Data, want)
			}
		}
	}
	all, exit := read(0)
	check(all, 0)
	t.Logf("journal of %d lines (%d bytes): %d exec streams hit, %d dropped mid-stream; delivered %d lines, each once, exit %d",
		lines, all[len(all)-1].End, f.Hits(), f.Drops(), len(all), exit.Code)
	if f.Drops() == 0 || exit.Code != 0 {
		t.Fatalf("drops %d exit %d: the fault never dropped a stream", f.Drops(), exit.Code)
	}
	f2 := s.Inject("exec", fakecloud.Fault{DropAfter: 16 << 10, Times: 6})
	rest, exit2 := read(all[1499].End)
	check(rest, 1500)
	t.Logf("reattached at offset %d: %d lines (1500..2999), each once, %d more streams dropped, exit %d", all[1499].End, len(rest), f2.Drops(), exit2.Code)
}

// TestSlowResponseDeadline: an answer slower than the call's deadline is
// DeadlineExceeded with the operation and path in the message. (The delay
// is a minute, the deadline half a second: the verdict is the code, and
// the fake's delay ends when the client goes away.)
func TestSlowResponseDeadline(t *testing.T) {
	ctx := testutil.HangGuard(t)
	s := newFake(t, fakecloud.GroupKill)
	p, _ := newProvider(t, s, refcloud.Options{Timeout: 500 * time.Millisecond})
	h := create(t, ctx, p, sandbox.CreateOptions{})
	f := s.Inject("get", fakecloud.Fault{Delay: time.Minute})
	_, err := p.Resume(ctx, h.ID())
	t.Logf("slow GET (%d delayed): %v", f.Hits(), err)
	if sandbox.CodeOf(err) != sandbox.DeadlineExceeded || !strings.Contains(err.Error(), "refcloud.resume") || !strings.Contains(err.Error(), "/v1/sandboxes/") {
		t.Fatalf("want DeadlineExceeded naming refcloud.resume and the path, got %v", err)
	}
	if strings.Contains(err.Error(), testToken) {
		t.Fatal("the token reached the error")
	}
}

// TestBadToken: a refused token is PermissionDenied with the backend's
// request id and message, never the token.
func TestBadToken(t *testing.T) {
	s := newFake(t, fakecloud.GroupKill)
	p, err := refcloud.New(refcloud.Options{BaseURL: s.URL(), Token: "wrong-token-123456"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Create(testutil.HangGuard(t), sandbox.CreateOptions{})
	t.Logf("bad token: %v", err)
	if sandbox.CodeOf(err) != sandbox.PermissionDenied || !strings.Contains(err.Error(), "request id req-") || strings.Contains(err.Error(), "wrong-token-123456") {
		t.Fatalf("got %v", err)
	}
}

// TestSecretsPerCommand: CreateOptions.Env and SetEnv reach commands but
// no REST body (create has no environment field); a resumed handle has
// none until SetEnv.
func TestSecretsPerCommand(t *testing.T) {
	ctx := testutil.HangGuard(t)
	s := newFake(t, fakecloud.GroupKill)
	p, _ := newProvider(t, s, refcloud.Options{})
	const canary = "canary-5e1f0c2a9b7d"
	h := create(t, ctx, p, sandbox.CreateOptions{Env: map[string]string{"CANARY": canary}})
	res, err := h.Exec(ctx, sandbox.Command{Shell: `printf %s "$CANARY"`})
	if err != nil || string(res.Stdout) != canary {
		t.Fatalf("the command did not get the secret: %q %v", res.Stdout, err)
	}
	r, err := p.Resume(ctx, h.ID())
	if err != nil {
		t.Fatal(err)
	}
	res, _ = r.Exec(ctx, sandbox.Command{Shell: `printf %s "${CANARY-unset}"`})
	if string(res.Stdout) != "unset" {
		t.Errorf("a resumed handle has the secret before SetEnv: %q", res.Stdout)
	}
	_ = r.SetEnv(ctx, map[string]string{"CANARY": canary})
	res, _ = r.Exec(ctx, sandbox.Command{Shell: `printf %s "$CANARY"`})
	if string(res.Stdout) != canary {
		t.Errorf("after SetEnv: %q", res.Stdout)
	}
	bodies := s.Bodies()
	for _, b := range bodies {
		if strings.Contains(string(b.Body), canary) {
			t.Fatalf("the secret reached the backend in a %s %s body", b.Method, b.Path)
		}
	}
	t.Logf("secret in commands: yes; in %d REST bodies (create included): 0", len(bodies))
}
