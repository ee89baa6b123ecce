package e2b_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/d10ffeed/corral/internal/fakecloud"
	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/journal"
	"github.com/d10ffeed/corral/provider/e2b"
	pb "github.com/d10ffeed/corral/provider/e2b/internal/envd/process"
	"github.com/d10ffeed/corral/provider/e2b/internal/envd/process/processconnect"
	"github.com/d10ffeed/corral/sandbox"
)

// TestResume429Burst: a burst of 429s with Retry-After on Resume's
// connect is waited out exactly as E2B asked.
func TestResume429Burst(t *testing.T) {
	ctx := testutil.HangGuard(t)
	f := newFake(t)
	p, sl := newProvider(t, f, e2b.Options{})
	h := create(t, ctx, p, sandbox.CreateOptions{})
	burst := f.Inject("connect", fakecloud.Fault{Status: 429, RetryAfter: "7", Times: 3})
	before := f.Count("connect")
	if _, err := p.Resume(ctx, h.ID()); err != nil {
		t.Fatalf("Resume after a 429 burst: %v", err)
	}
	pauses := sl.All()
	t.Logf("429 burst: %d refused, %d connects sent, pauses %v", burst.Hits(), f.Count("connect")-before, pauses)
	if burst.Hits() != 3 || f.Count("connect")-before != 4 || len(pauses) != 3 {
		t.Fatalf("hits %d, connects %d, pauses %v", burst.Hits(), f.Count("connect")-before, pauses)
	}
	for _, d := range pauses {
		if d != 7*time.Second {
			t.Errorf("pause %v, want the Retry-After of 7s", d)
		}
	}
}

// TestCreateReconciled: a create answered 503 (not made) is looked up by
// the key's metadata and sent again; a create made and answered 504 is
// found by it: exactly one sandbox either way, and none after Destroy.
func TestCreateReconciled(t *testing.T) {
	for _, tc := range []struct {
		name    string
		fault   fakecloud.Fault
		creates int
	}{
		{"503-not-made", fakecloud.Fault{Status: 503}, 2},
		{"504-accepted", fakecloud.Fault{Status: 504, Accept: true}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testutil.HangGuard(t)
			f := newFake(t)
			p, _ := newProvider(t, f, e2b.Options{})
			f.Inject("create", tc.fault)
			h, err := p.Create(ctx, sandbox.CreateOptions{ID: "key-" + tc.name})
			if err != nil {
				t.Fatalf("Create: %v", err)
			}
			all := f.Sandboxes("", nil)
			t.Logf("%s: %d creates sent, %d lookups by metadata, %d sandboxes (handle %s, key %q)",
				tc.name, f.Count("create"), f.Count("list"), len(all), h.ID(), f.Metadata(h.ID())[e2b.MetaKey])
			if len(all) != 1 || all[0].ID != h.ID() || f.Count("create") != tc.creates || f.Count("list") != 1 {
				t.Fatalf("sandboxes %d, creates %d (want %d), lookups %d", len(all), f.Count("create"), tc.creates, f.Count("list"))
			}
			if res, err := h.Exec(ctx, sandbox.Command{Args: []string{"pwd"}}); err != nil || strings.TrimSpace(string(res.Stdout)) != h.WorkspaceRoot() {
				t.Fatalf("exec in the reconciled sandbox: %v", err)
			}
			if err := h.Destroy(ctx); err != nil || len(f.Sandboxes("", nil)) != 0 {
				t.Fatalf("Destroy: %v, %d left", err, len(f.Sandboxes("", nil)))
			}
		})
	}
}

// TestExecStreamDropped: the Start stream drops in the middle of an
// Exec's output: Unavailable at once, and the next Exec works.
func TestExecStreamDropped(t *testing.T) {
	ctx := testutil.HangGuard(t)
	f := newFake(t)
	p, _ := newProvider(t, f, e2b.Options{})
	h := create(t, ctx, p, sandbox.CreateOptions{})
	in := f.Inject("start", fakecloud.Fault{DropAfter: 100 << 10})
	_, err := h.Exec(ctx, sandbox.Command{Shell: `head -c 1048576 /dev/zero`})
	t.Logf("dropped after 100 KiB of 1 MiB: %v (code %v), drops %d", err, sandbox.CodeOf(err), in.Drops())
	if sandbox.CodeOf(err) != sandbox.Unavailable || !strings.Contains(err.Error(), "dropped after") || in.Drops() != 1 {
		t.Fatalf("want Unavailable saying the stream dropped, got %v", err)
	}
	res, err := h.Exec(ctx, sandbox.Command{Shell: `head -c 1048576 /dev/zero`})
	if err != nil || len(res.Stdout) != 1<<20 {
		t.Fatalf("the next Exec: %v", err)
	}
}

// TestJournaledRunSurvivesDrops: the streams a journal reader uses drop
// mid-output; every line still arrives exactly once, in order, and a
// reader attached at an offset gets exactly the rest.
func TestJournaledRunSurvivesDrops(t *testing.T) {
	ctx := testutil.HangGuard(t)
	f := newFake(t)
	p, _ := newProvider(t, f, e2b.Options{})
	h := create(t, ctx, p, sandbox.CreateOptions{})
	paths, err := journal.PathsFor("", fmt.Sprintf("e2b-drop-%d", time.Now().UnixNano()))
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
	in := f.Inject("start", fakecloud.Fault{DropAfter: 16 << 10, Times: 6})
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
	t.Logf("journal of %d lines (%d bytes): %d Start streams hit, %d dropped; delivered %d lines, each once, exit %d",
		lines, all[len(all)-1].End, in.Hits(), in.Drops(), len(all), exit.Code)
	if in.Drops() == 0 || exit.Code != 0 {
		t.Fatalf("drops %d exit %d", in.Drops(), exit.Code)
	}
	in2 := f.Inject("start", fakecloud.Fault{DropAfter: 16 << 10, Times: 6})
	rest, exit2 := read(all[1499].End)
	check(rest, 1500)
	t.Logf("reattached at offset %d: %d lines (1500..2999), each once, %d more streams dropped, exit %d", all[1499].End, len(rest), in2.Drops(), exit2.Code)
}

// TestSlowResponseDeadline: an answer slower than the request timeout is
// DeadlineExceeded naming the operation, never the key.
func TestSlowResponseDeadline(t *testing.T) {
	ctx := testutil.HangGuard(t)
	f := newFake(t)
	p, _ := newProvider(t, f, e2b.Options{RequestTimeout: 500 * time.Millisecond})
	h := create(t, ctx, p, sandbox.CreateOptions{})
	in := f.Inject("connect", fakecloud.Fault{Delay: time.Minute})
	_, err := p.Resume(ctx, h.ID())
	t.Logf("slow connect (%d delayed): %v", in.Hits(), err)
	if sandbox.CodeOf(err) != sandbox.DeadlineExceeded || !strings.Contains(err.Error(), "e2b.resume") || strings.Contains(err.Error(), testKey) {
		t.Fatalf("want DeadlineExceeded naming e2b.resume, got %v", err)
	}
}

// TestSecretsPerCommand: CreateOptions.Env and SetEnv reach commands but
// no control-plane body (envVars stays empty); a resumed handle has none
// until SetEnv.
func TestSecretsPerCommand(t *testing.T) {
	ctx := testutil.HangGuard(t)
	f := newFake(t)
	p, _ := newProvider(t, f, e2b.Options{})
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
	control := 0
	for _, b := range f.Bodies() {
		if strings.HasPrefix(b.Path, "/process.") || strings.HasPrefix(b.Path, "/filesystem.") || b.Path == "/files" {
			continue // envd: the command itself
		}
		control++
		if strings.Contains(string(b.Body), canary) {
			t.Fatalf("the secret reached E2B's control plane in a %s %s body", b.Method, b.Path)
		}
	}
	t.Logf("secret in commands: yes; in %d control-plane bodies (create included): 0", control)
}

// TestEnvdKillIsPIDOnly shows the fake kills as envd does: SendSignal
// SIGKILL reaches the one pid and a backgrounded grandchild survives;
// the provider's Kill (the group kill) leaves nothing.
func TestEnvdKillIsPIDOnly(t *testing.T) {
	ctx := testutil.HangGuard(t)
	f := newFake(t)
	p, _ := newProvider(t, f, e2b.Options{})
	h := create(t, ctx, p, sandbox.CreateOptions{})

	// Straight to envd, as the SDK's commands.kill does.
	tok := envdToken(t, f, h.ID())
	hc := &http.Client{Transport: headerRT{h: http.Header{e2b.HeaderAccessToken: {tok}, e2b.HeaderSandboxID: {h.ID()}}}}
	pc := processconnect.NewProcessClient(hc, f.URL())
	st, err := pc.Start(ctx, connect.NewRequest(&pb.StartRequest{Process: &pb.ProcessConfig{Cmd: "/bin/sh", Args: []string{"-c", "sleep 300 & echo $!; wait"}}}))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var pid uint32
	var out strings.Builder
	for !strings.Contains(out.String(), "\n") && st.Receive() {
		ev := st.Msg().GetEvent()
		if s := ev.GetStart(); s != nil {
			pid = s.Pid
		}
		out.Write(ev.GetData().GetStdout())
	}
	gpid, _ := strconv.Atoi(strings.TrimSpace(out.String()))
	if _, err := pc.SendSignal(ctx, connect.NewRequest(&pb.SendSignalRequest{Process: &pb.ProcessSelector{Selector: &pb.ProcessSelector_Pid{Pid: pid}}, Signal: pb.Signal_SIGNAL_SIGKILL})); err != nil {
		t.Fatal(err)
	}
	ended := false
	for st.Receive() { // envd stops forwarding on SIGKILL: the end comes though the grandchild holds the output
		ended = ended || st.Msg().GetEvent().GetEnd() != nil
	}
	for deadline := time.Now().Add(20 * time.Second); fakecloud.Alive(int(pid)) && time.Now().Before(deadline); { // hang guard
		time.Sleep(20 * time.Millisecond)
	}
	survived := fakecloud.Alive(gpid)

	// Through the provider.
	pr, err := h.Spawn(ctx, sandbox.Command{Shell: `sleep 300 & echo $!; wait`})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = io.Copy(io.Discard, pr.Stderr()) }()
	line, err := bufio.NewReader(pr.Stdout()).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	g2, _ := strconv.Atoi(strings.TrimSpace(line))
	if err := pr.Kill(ctx, 0); err != nil {
		t.Fatal(err)
	}
	left := fakecloud.Alive(g2) || fakecloud.Alive(pr.PID())
	t.Logf("envd SendSignal SIGKILL to pid %d: end event %v, grandchild %d survived %v; provider Kill of pid %d: anything left %v",
		pid, ended, gpid, survived, pr.PID(), left)
	if !survived || left || !ended {
		t.Fatalf("survived %v (want true: envd kills one pid), left after the provider's kill %v (want false)", survived, left)
	}
}

type headerRT struct{ h http.Header }

func (rt headerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range rt.h {
		r.Header[k] = v
	}
	return http.DefaultTransport.RoundTrip(r)
}

// envdToken reads a sandbox's envd access token from the control plane.
func envdToken(t *testing.T, f interface{ URL() string }, id string) string {
	t.Helper()
	req, _ := http.NewRequest("GET", f.URL()+"/sandboxes/"+id, nil)
	req.Header.Set(e2b.HeaderAPIKey, testKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var d e2b.SandboxDetail
	if err := jsonDecode(resp.Body, &d); err != nil {
		t.Fatal(err)
	}
	return d.EnvdAccessToken
}

func jsonDecode(r io.Reader, v any) error { return json.NewDecoder(r).Decode(v) }

func httpNewJSON(method, url, body string) (*http.Request, error) {
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err == nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return req, err
}

func httpDo(req *http.Request) (*http.Response, error) { return http.DefaultClient.Do(req) }
