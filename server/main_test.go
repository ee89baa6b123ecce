package server_test

// Shared helpers for the daemon's tests: a real server on loopback over a
// real runner (local provider, command harness), raw HTTP and SSE helpers,
// and the event-to-line decoding the tests compare.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/d10ffeed/corral/client"
	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/harness/command"
	"github.com/d10ffeed/corral/provider/local"
	"github.com/d10ffeed/corral/run"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/server"
	"github.com/d10ffeed/corral/store"
	"github.com/d10ffeed/corral/store/memstore"
)

// env is one daemon on loopback: an httptest server around server.New's
// handler, over a runner with the local provider and the command harness.
type env struct {
	t       *testing.T
	URL     string
	Store   store.Store
	Runner  *run.Runner
	Server  *server.Server
	HTTP    *httptest.Server
	BaseDir string             // the local provider's sandboxes
	Tools   *server.AgentTools // with envOptions.ToolsKey
}

// envOptions tune newEnv; every field has a default.
type envOptions struct {
	Store   store.Store                     // default: a fresh memstore
	Tokens  map[string]string               // default: none (NoAuth)
	Hosts   []string                        // Options.AllowedHosts
	Origins []string                        // Options.AllowedOrigins
	MaxBody int64                           // default: the server's
	Wrap    func(http.Handler) http.Handler // wraps the server's handler
	RunOpts run.Options                     // the runner's options
	Defs    []string                        // definition ids; default {"default"}
	Extra   []harness.Harness               // harnesses besides command
	// Workspace is every definition's workspace (default: empty).
	Workspace *sandbox.Workspace
	// Decorate, when set, wraps every sandbox handle (sandbox.GuardOptions).
	Decorate func(sandbox.Handle) sandbox.Handle
	// ToolsKey, when set, gives runs the agents' tools (server.AgentTools
	// with this key, reached at the daemon's loopback URL).
	ToolsKey []byte
}

func newEnv(t *testing.T, o envOptions) *env {
	t.Helper()
	base := t.TempDir()
	p, err := local.New(local.Options{BaseDir: base})
	if err != nil {
		t.Fatal(err)
	}
	st := o.Store
	if st == nil {
		st = memstore.New(memstore.Options{})
		t.Cleanup(func() { _ = st.Close() })
	}
	if len(o.Defs) == 0 {
		o.Defs = []string{"default"}
	}
	var prov sandbox.Provider = p
	if o.Decorate != nil {
		prov = sandbox.Guard(p, sandbox.GuardOptions{Decorate: o.Decorate})
	}
	var defs []*sandbox.Definition
	for _, id := range o.Defs {
		defs = append(defs, &sandbox.Definition{ID: id, Provider: prov, Workspace: o.Workspace})
	}
	if o.RunOpts.PollInterval == 0 {
		o.RunOpts.PollInterval = 50 * time.Millisecond
	}
	hs, names := []harness.Harness{command.Harness{}}, []string{command.Name}
	for _, h := range o.Extra {
		hs, names = append(hs, h), append(names, h.Name())
	}
	ts := httptest.NewUnstartedServer(nil)
	var tools *server.AgentTools
	if o.ToolsKey != nil {
		tools, err = server.NewAgentTools(o.ToolsKey, map[string]string{"local": "http://" + ts.Listener.Addr().String()}, nil)
		if err != nil {
			t.Fatal(err)
		}
		o.RunOpts.Tools = tools
	}
	r, err := run.New(st, defs, hs, o.RunOpts)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Options{Runner: r, Definitions: o.Defs, Harnesses: names, Tools: tools,
		Tokens: o.Tokens, NoAuth: len(o.Tokens) == 0, AllowedHosts: o.Hosts, AllowedOrigins: o.Origins, MaxBody: o.MaxBody})
	if err != nil {
		t.Fatal(err)
	}
	var h http.Handler = srv.Handler()
	if o.Wrap != nil {
		h = o.Wrap(h)
	}
	ts.Config.Handler = h
	ts.Start()
	e := &env{t: t, URL: ts.URL, Store: st, Runner: r, Server: srv, HTTP: ts, BaseDir: base, Tools: tools}
	// Cleanups run last-in first-out: the HTTP server stops (streams cut),
	// then runs still going are cancelled and waited for, then the runner
	// closes; the store (registered above) closes after all of that.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		e.cancelAll(ctx)
		if err := r.Close(ctx); err != nil {
			t.Errorf("closing the runner: %v", err)
		}
	})
	t.Cleanup(func() {
		ts.CloseClientConnections()
		ts.Close()
	})
	return e
}

// cancelAll cancels every run still going and waits (bounded) for each to
// end, so no agent outlives the test.
func (e *env) cancelAll(ctx context.Context) {
	runs, err := e.Store.ListRuns(ctx, store.RunFilter{Statuses: []store.RunStatus{store.RunRunning}})
	if err != nil {
		e.t.Errorf("listing running runs: %v", err)
		return
	}
	for _, rec := range runs {
		if _, err := e.Runner.Cancel(ctx, rec.ID); err != nil {
			e.t.Errorf("cancelling %s: %v", rec.ID, err)
			continue
		}
		for ctx.Err() == nil {
			got, ok, err := e.Store.GetRun(ctx, rec.ID)
			if err != nil || !ok || got.Status.Terminal() {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// client returns a Go client for the daemon.
func (e *env) client(token string) *client.Client {
	e.t.Helper()
	c, err := client.New(e.URL, token)
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

// runCount returns how many runs the store holds.
func (e *env) runCount() int {
	e.t.Helper()
	runs, err := e.Store.ListRuns(context.Background(), store.RunFilter{})
	if err != nil {
		e.t.Fatal(err)
	}
	return len(runs)
}

// waitStatus polls the store until the run is in the status, or fails.
func (e *env) waitStatus(id string, want store.RunStatus, within time.Duration) store.Run {
	e.t.Helper()
	deadline := time.Now().Add(within)
	for {
		rec, ok, err := e.Store.GetRun(context.Background(), id)
		if err != nil || !ok {
			e.t.Fatalf("reading run %s: ok=%v err=%v", id, ok, err)
		}
		if rec.Status == want {
			return rec
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("run %s is %s after %v, want %s (error %q)", id, rec.Status, within, want, rec.Error)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// testCtx is a context bounded for the test.
func testCtx(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// request is one raw HTTP request. Writes and requests with a body go as
// application/json unless Header says otherwise; a Header value of ""
// removes that header.
type request struct {
	Method, Path string
	Body         string
	Header       map[string]string
	Token        string
}

// do sends a raw request and returns the response and its whole body.
func do(t *testing.T, base string, r request) (*http.Response, []byte) {
	t.Helper()
	var body io.Reader
	if r.Body != "" {
		body = strings.NewReader(r.Body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, r.Method, base+r.Path, body)
	if err != nil {
		t.Fatal(err)
	}
	if r.Body != "" || (r.Method != "GET" && r.Method != "HEAD") {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range r.Header {
		if v == "" {
			req.Header.Del(k)
			continue
		}
		if strings.EqualFold(k, "Host") {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	if r.Token != "" {
		req.Header.Set("Authorization", "Bearer "+r.Token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", r.Method, r.Path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the body: %v", r.Method, r.Path, err)
	}
	return resp, b
}

// apiError decodes an error body, failing unless it is JSON with a code and
// a message.
func apiError(t *testing.T, resp *http.Response, body []byte) (code, msg string) {
	t.Helper()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("error response Content-Type %q, want application/json (body %q)", ct, body)
	}
	var e struct{ Code, Message string }
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatalf("error body is not JSON: %v: %q", err, body)
	}
	if e.Code == "" || e.Message == "" {
		t.Errorf("error body lacks a code or a message: %q", body)
	}
	return e.Code, e.Message
}

// sse is one Server-Sent Event; End marks the daemon's ": end" comment,
// which ends a finished run's stream.
type sse struct {
	ID, Event, Data string
	End             bool
}

// readSSE parses a whole event stream (comments dropped).
func readSSE(t *testing.T, body []byte) []sse {
	t.Helper()
	var out []sse
	err := scanSSE(bytes.NewReader(body), func(e sse) bool { out = append(out, e); return true })
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// scanSSE calls fn with each event read from r until fn returns false or r
// ends.
func scanSSE(r io.Reader, fn func(sse) bool) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 16<<20)
	var cur sse
	var data []string
	has := false
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if has {
				cur.Data = strings.Join(data, "\n")
				if !fn(cur) {
					return nil
				}
			}
			cur, data, has = sse{}, nil, false
		case line == ": end":
			if !fn(sse{End: true}) {
				return nil
			}
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "id:"):
			cur.ID, has = strings.TrimSpace(line[3:]), true
		case strings.HasPrefix(line, "event:"):
			cur.Event, has = strings.TrimSpace(line[6:]), true
		case strings.HasPrefix(line, "data:"):
			data, has = append(data, strings.TrimPrefix(line[5:], " ")), true
		}
	}
	return sc.Err()
}

// checkStream checks a finished stream: ids are the sequence numbers
// first, first+1, …, every data event has one and is an AG-UI event (it
// has a type), and it ends with the ": end" comment, once. It returns the
// data events' payloads.
func checkStream(t *testing.T, evs []sse, first int64) []string {
	t.Helper()
	if len(evs) == 0 || !evs[len(evs)-1].End {
		t.Fatalf("stream does not end with the end comment: %+v", tail(evs))
	}
	var out []string
	want := first
	for _, e := range evs[:len(evs)-1] {
		if e.Event != "" {
			t.Fatalf("unexpected event %q in the stream: %+v", e.Event, e)
		}
		if e.End {
			t.Fatalf("an end comment before the stream's end: %+v", tail(evs))
		}
		if ev, err := event.Unmarshal([]byte(e.Data)); err != nil || ev.Type == "" {
			t.Fatalf("data frame %q is not an AG-UI event (%v)", e.Data, err)
		}
		if e.ID != fmt.Sprint(want) {
			t.Fatalf("event id %q, want %d (no gap, no repeat)", e.ID, want)
		}
		want++
		out = append(out, e.Data)
	}
	return out
}

func tail(evs []sse) []sse {
	if len(evs) > 3 {
		return evs[len(evs)-3:]
	}
	return evs
}

// textLines returns the lines of the TEXT_MESSAGE_CONTENT events among
// payloads, in order.
func textLines(t *testing.T, payloads []string) []string {
	t.Helper()
	var out []string
	for _, p := range payloads {
		ev, err := event.Unmarshal([]byte(p))
		if err != nil {
			t.Fatalf("bad event payload %q: %v", p, err)
		}
		if ev.Type == event.TextMessageContent {
			out = append(out, strings.TrimSuffix(ev.Delta, "\n"))
		}
	}
	return out
}

// numbered returns prefix1 … prefixN.
func numbered(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d", prefix, i+1)
	}
	return out
}

// sameLines fails unless got equals want, naming the first difference.
func sameLines(t *testing.T, got, want []string) {
	t.Helper()
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			t.Fatalf("line %d is %q, want %q (got %d lines, want %d)", i, got[i], want[i], len(got), len(want))
		}
	}
	if len(got) != len(want) {
		t.Fatalf("got %d lines, want %d (last got %q)", len(got), len(want), got[len(got)-1:])
	}
}

// startJSON starts a run with a JSON body and returns its id.
func (e *env) startJSON(token, body string) string {
	e.t.Helper()
	resp, b := do(e.t, e.URL, request{Method: "POST", Path: "/v1/runs", Body: body, Token: token})
	if resp.StatusCode != http.StatusCreated {
		e.t.Fatalf("POST /v1/runs: %s: %s", resp.Status, b)
	}
	var r struct{ ID, Status string }
	if err := json.Unmarshal(b, &r); err != nil || r.ID == "" {
		e.t.Fatalf("POST /v1/runs: bad body %q: %v", b, err)
	}
	if resp.Header.Get("Location") != "/v1/runs/"+r.ID || resp.Header.Get("X-Run-Id") != r.ID {
		e.t.Errorf("Location %q X-Run-Id %q for run %s", resp.Header.Get("Location"), resp.Header.Get("X-Run-Id"), r.ID)
	}
	return r.ID
}

func jsonBody(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
