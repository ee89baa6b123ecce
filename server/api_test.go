package server_test

// The HTTP API against a real server on loopback: starting runs (JSON and
// SSE), replay from an offset or Last-Event-ID, listing, the thread's
// active run, cancel, sandboxes, health and metrics, bad input, and the Go
// client for the same flows, including a stream the server drops.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/d10ffeed/corral/api"
	"github.com/d10ffeed/corral/client"
	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
)

const fiftyLines = `for i in $(seq 1 50); do echo line$i; done`

// streamAll reads a run's events as SSE from the given offset (as ?offset=
// or, with header set, as Last-Event-ID) until the stream ends.
func streamAll(t *testing.T, e *env, id string, after int64, asHeader bool) []sse {
	t.Helper()
	r := request{Method: "GET", Path: "/v1/runs/" + id + "/events", Header: map[string]string{"Accept": "text/event-stream"}}
	if asHeader {
		r.Header["Last-Event-ID"] = fmt.Sprint(after)
	} else {
		r.Path += fmt.Sprintf("?offset=%d", after)
	}
	resp, body := do(t, e.URL, r)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s: %s", r.Path, resp.Status, body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q, want text/event-stream", ct)
	}
	return readSSE(t, body)
}

func TestStartJSONThenReplay(t *testing.T) {
	e := newEnv(t, envOptions{})
	id := e.startJSON("", jsonBody(t, api.StartRun{Prompt: fiftyLines}))

	all := checkStream(t, streamAll(t, e, id, 0, false), 1)
	sameLines(t, textLines(t, all), numbered("line", 50))
	first, _ := event.Unmarshal([]byte(all[0]))
	last, _ := event.Unmarshal([]byte(all[len(all)-1]))
	if first.Type != event.RunStarted || last.Type != event.RunFinished {
		t.Fatalf("first event %s, last %s; want RUN_STARTED … RUN_FINISHED", first.Type, last.Type)
	}
	n := int64(len(all))

	resp, body := do(t, e.URL, request{Method: "GET", Path: "/v1/runs/" + id})
	var got api.Run
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &got) != nil {
		t.Fatalf("GET run: %s %s", resp.Status, body)
	}
	if got.ID != id || got.Status != "completed" || got.LastSeq != n || got.ExitCode == nil || *got.ExitCode != 0 || got.FinishedAt == nil {
		t.Fatalf("run = %+v, want completed with exit 0 and lastSeq %d", got, n)
	}
	if strings.Contains(strings.ToLower(string(body)), "nonce") {
		t.Errorf("the run body shows the journal nonce: %s", body)
	}

	// Replay from every interesting offset, as ?offset= and as
	// Last-Event-ID: exactly the events after it, no gap and no repeat.
	for _, after := range []int64{0, 1, 2, 10, n / 2, n - 1, n} {
		for _, hdr := range []bool{false, true} {
			evs := checkStream(t, streamAll(t, e, id, after, hdr), after+1)
			if !slicesEqual(evs, all[after:]) {
				t.Fatalf("replay after %d (header %v): %d events differ from the stored %d", after, hdr, len(evs), len(all[after:]))
			}
		}
	}

	// Last-Event-ID wins over ?offset= (what EventSource sends when it
	// reconnects to a URL that carries an offset).
	resp, body = do(t, e.URL, request{Method: "GET", Path: "/v1/runs/" + id + "/events?offset=0",
		Header: map[string]string{"Accept": "text/event-stream", "Last-Event-ID": "7"}})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s %s", resp.Status, body)
	}
	checkStream(t, readSSE(t, body), 8)

	// The JSON form of the log, from an offset.
	resp, body = do(t, e.URL, request{Method: "GET", Path: "/v1/runs/" + id + "/events?format=json&offset=5"})
	var stored []store.Event
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &stored) != nil {
		t.Fatalf("format=json: %s %s", resp.Status, body)
	}
	if int64(len(stored)) != n-5 || stored[0].Seq != 6 || string(stored[0].Data) != all[5] {
		t.Fatalf("format=json from 5: %d events, first seq %d", len(stored), stored[0].Seq)
	}
}

func slicesEqual(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestStartStreaming(t *testing.T) {
	e := newEnv(t, envOptions{})
	resp, body := do(t, e.URL, request{Method: "POST", Path: "/v1/runs", Body: jsonBody(t, api.StartRun{Prompt: fiftyLines}),
		Header: map[string]string{"Accept": "text/event-stream"}})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST with Accept: text/event-stream: %s %s", resp.Status, body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	id := resp.Header.Get("X-Run-Id")
	if id == "" || resp.Header.Get("Location") != "/v1/runs/"+id {
		t.Fatalf("X-Run-Id %q Location %q", id, resp.Header.Get("Location"))
	}
	evs := checkStream(t, readSSE(t, body), 1)
	sameLines(t, textLines(t, evs), numbered("line", 50))
	rec := e.waitStatus(id, store.RunCompleted, time.Minute)
	if last, _ := e.Store.LastSeq(context.Background(), rec.ID); last != int64(len(evs)) {
		t.Fatalf("the stream had %d events, the log %d", len(evs), last)
	}
}

// sleeper prints a line and then sleeps until cancelled.
const sleeper = `echo started; sleep 60; echo never`

// waitLine polls the run's log until a text line equal to want is stored.
func (e *env) waitLine(id, want string, within time.Duration) {
	e.t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		evs, err := e.Store.ReadEvents(context.Background(), id, 0, 0)
		if err != nil {
			e.t.Fatal(err)
		}
		var payloads []string
		for _, ev := range evs {
			payloads = append(payloads, string(ev.Data))
		}
		for _, l := range textLines(e.t, payloads) {
			if l == want {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	e.t.Fatalf("run %s: no line %q within %v", id, want, within)
}

func TestListActiveAndCancel(t *testing.T) {
	e := newEnv(t, envOptions{})
	done := e.startJSON("", jsonBody(t, api.StartRun{Thread: "t-done", Prompt: "echo hi"}))
	e.waitStatus(done, store.RunCompleted, time.Minute)
	id := e.startJSON("", jsonBody(t, api.StartRun{Thread: "t-live", Prompt: sleeper}))
	e.waitLine(id, "started", time.Minute)

	list := func(q string) []api.Run {
		t.Helper()
		resp, body := do(t, e.URL, request{Method: "GET", Path: "/v1/runs" + q})
		var out api.Runs
		if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &out) != nil {
			t.Fatalf("GET /v1/runs%s: %s %s", q, resp.Status, body)
		}
		return out.Runs
	}
	ids := func(rs []api.Run) []string {
		var out []string
		for _, r := range rs {
			out = append(out, r.ID)
		}
		return out
	}
	if got := ids(list("")); !slicesEqual(got, []string{id, done}) {
		t.Fatalf("GET /v1/runs = %v, want newest first [%s %s]", got, id, done)
	}
	if got := ids(list("?thread=t-done")); !slicesEqual(got, []string{done}) {
		t.Fatalf("?thread=t-done = %v", got)
	}
	if got := ids(list("?status=running")); !slicesEqual(got, []string{id}) {
		t.Fatalf("?status=running = %v", got)
	}
	if got := ids(list("?status=completed,cancelled")); !slicesEqual(got, []string{done}) {
		t.Fatalf("?status=completed,cancelled = %v", got)
	}
	if got := list("?limit=1"); len(got) != 1 {
		t.Fatalf("?limit=1 gave %d runs", len(got))
	}

	resp, body := do(t, e.URL, request{Method: "GET", Path: "/v1/threads/t-live/active"})
	var active api.Run
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &active) != nil || active.ID != id || active.Status != "running" {
		t.Fatalf("active run of t-live: %s %s", resp.Status, body)
	}
	resp, body = do(t, e.URL, request{Method: "GET", Path: "/v1/threads/t-done/active"})
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("active run of a thread with none: %s %s", resp.Status, body)
	}
	apiError(t, resp, body)

	// Someone is watching the run while it is cancelled: the stream ends.
	streamDone := make(chan []sse, 1)
	go func() {
		req, _ := http.NewRequest("GET", e.URL+"/v1/runs/"+id+"/events", nil)
		req.Header.Set("Accept", "text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			streamDone <- nil
			return
		}
		defer resp.Body.Close()
		var evs []sse
		_ = scanSSE(resp.Body, func(ev sse) bool { evs = append(evs, ev); return true })
		streamDone <- evs
	}()

	began := time.Now()
	resp, body = do(t, e.URL, request{Method: "POST", Path: "/v1/runs/" + id + "/cancel"})
	var cancelled api.Run
	if resp.StatusCode != http.StatusAccepted || json.Unmarshal(body, &cancelled) != nil || cancelled.CancelRequested == nil {
		t.Fatalf("cancel: %s %s", resp.Status, body)
	}
	for {
		resp, body = do(t, e.URL, request{Method: "GET", Path: "/v1/runs/" + id})
		var r api.Run
		if err := json.Unmarshal(body, &r); err != nil {
			t.Fatal(err)
		}
		if r.Status == "cancelled" {
			break
		}
		if r.Status != "running" || time.Since(began) > time.Minute { // a hang guard
			t.Fatalf("run is %s %v after cancel, want cancelled", r.Status, time.Since(began))
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("cancelled in %v", time.Since(began))
	select {
	case evs := <-streamDone:
		payloads := checkStream(t, evs, 1)
		if lines := textLines(t, payloads); !slicesEqual(lines, []string{"started"}) {
			t.Fatalf("the agent was not stopped: %v", lines)
		}
	case <-time.After(time.Minute): // a hang guard
		t.Fatal("the event stream did not end after the cancel")
	}
	if resp, _ := do(t, e.URL, request{Method: "GET", Path: "/v1/threads/t-live/active"}); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("the thread still has an active run after the cancel: %s", resp.Status)
	}
	// Cancelling a terminal run changes nothing.
	resp, body = do(t, e.URL, request{Method: "POST", Path: "/v1/runs/" + done + "/cancel"})
	var again api.Run
	if resp.StatusCode != http.StatusAccepted || json.Unmarshal(body, &again) != nil || again.Status != "completed" {
		t.Fatalf("cancel of a completed run: %s %s", resp.Status, body)
	}
}

func TestSandboxes(t *testing.T) {
	e := newEnv(t, envOptions{})
	id := e.startJSON("", jsonBody(t, api.StartRun{Thread: "t-sb", Prompt: "echo hi > note.txt"}))
	rec := e.waitStatus(id, store.RunCompleted, time.Minute)

	resp, body := do(t, e.URL, request{Method: "GET", Path: "/v1/sandboxes"})
	var list api.Sandboxes
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &list) != nil {
		t.Fatalf("GET /v1/sandboxes: %s %s", resp.Status, body)
	}
	if len(list.Sandboxes) != 1 {
		t.Fatalf("sandboxes = %+v, want the run's one", list.Sandboxes)
	}
	sb := list.Sandboxes[0]
	if sb.Key != rec.SandboxKey || sb.Thread != "t-sb" || sb.Provider != "local" || sb.Definition != "default" || sb.ProviderSandboxID == "" {
		t.Fatalf("sandbox = %+v, want key %s of thread t-sb", sb, rec.SandboxKey)
	}
	if _, err := os.Stat(sb.ProviderSandboxID); err != nil {
		t.Fatalf("the sandbox directory: %v", err)
	}

	resp, body = do(t, e.URL, request{Method: "DELETE", Path: "/v1/sandboxes/" + sb.Key})
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE: %s %s", resp.Status, body)
	}
	if _, err := os.Stat(sb.ProviderSandboxID); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the sandbox directory is still there after DELETE: %v", err)
	}
	resp, body = do(t, e.URL, request{Method: "GET", Path: "/v1/sandboxes"})
	if json.Unmarshal(body, &list) != nil || len(list.Sandboxes) != 0 {
		t.Fatalf("sandboxes after DELETE: %s", body)
	}
	resp, body = do(t, e.URL, request{Method: "DELETE", Path: "/v1/sandboxes/" + sb.Key})
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("second DELETE: %s %s", resp.Status, body)
	}
	apiError(t, resp, body)
}

func TestHealthzAndMetrics(t *testing.T) {
	e := newEnv(t, envOptions{})
	resp, body := do(t, e.URL, request{Method: "GET", Path: "/healthz"})
	if resp.StatusCode != http.StatusOK || strings.TrimSpace(string(body)) != "ok" {
		t.Fatalf("/healthz: %s %q", resp.Status, body)
	}
	for range 2 {
		id := e.startJSON("", jsonBody(t, api.StartRun{Prompt: "echo hi"}))
		e.waitStatus(id, store.RunCompleted, time.Minute)
	}
	resp, body = do(t, e.URL, request{Method: "GET", Path: "/metrics"})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %s", resp.Status)
	}
	for _, want := range []string{
		`(?m)^corral_runs_started_total 2$`,
		`(?m)^corral_runs\{status="completed"\} 2$`,
		`(?m)^corral_runs\{status="running"\} 0$`,
		`(?m)^corral_sandboxes\{provider="local"\} 2$`,
		`(?m)^corral_takeovers_total 0$`,
		`(?m)^corral_checkpoint_pruned_total 0$`,
		`(?m)^corral_blobs_swept_total 0$`,
	} {
		if !regexp.MustCompile(want).Match(body) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", grepLines(body, "corral_"))
	}
}

func grepLines(b []byte, sub string) string {
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, sub) && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func TestBadInput(t *testing.T) {
	const limit = 4096
	e := newEnv(t, envOptions{MaxBody: limit, Defs: []string{"default", "other"}})
	// One real run, for the offset cases (trailing white space is fine).
	id := e.startJSON("", jsonBody(t, api.StartRun{Prompt: "echo hi"})+"\r\n\t ")
	e.waitStatus(id, store.RunCompleted, time.Minute)
	runs := e.runCount()

	stream := map[string]string{"Accept": "text/event-stream"}
	cases := []struct {
		name   string
		req    request
		status int
		code   string
		msg    string // a part of the message
	}{
		{"unknown definition", request{Method: "POST", Path: "/v1/runs", Body: `{"definition":"nope","prompt":"echo hi"}`},
			404, "NotFound", "unknown sandbox definition (known: default, other)"},
		{"unknown harness", request{Method: "POST", Path: "/v1/runs", Body: `{"harness":"nope","prompt":"echo hi"}`},
			400, "InvalidArgument", `unknown harness "nope" (known: command)`},
		{"a mode the harness has not", request{Method: "POST", Path: "/v1/runs", Body: `{"prompt":"echo hi","mode":"plan"}`},
			400, "InvalidArgument", `the command harness has no agent mode (mode "plan")`},
		{"a mode through AG-UI's forwardedProps", request{Method: "POST", Path: "/v1/runs", Body: `{"threadId":"t-mode","runId":"run-mode-1","messages":[{"id":"m1","role":"user","content":"echo hi"}],"forwardedProps":{"mode":"plan"}}`},
			400, "InvalidArgument", `the command harness has no agent mode (mode "plan")`},
		{"empty prompt", request{Method: "POST", Path: "/v1/runs", Body: `{"prompt":"  \n"}`},
			400, "InvalidArgument", "empty prompt"},
		{"no prompt", request{Method: "POST", Path: "/v1/runs", Body: `{}`},
			400, "InvalidArgument", "empty prompt"},
		{"empty body", request{Method: "POST", Path: "/v1/runs"},
			400, "InvalidArgument", "not a valid run request"},
		{"oversize body", request{Method: "POST", Path: "/v1/runs", Body: `{"prompt":"` + strings.Repeat("x", 4*limit) + `"}`},
			413, "InvalidArgument", "larger than 4096 bytes"},
		{"oversize body, streaming", request{Method: "POST", Path: "/v1/runs", Body: `{"prompt":"` + strings.Repeat("x", 4*limit) + `"}`, Header: stream},
			413, "InvalidArgument", "larger than 4096 bytes"},
		{"malformed JSON", request{Method: "POST", Path: "/v1/runs", Body: `{"prompt":`},
			400, "InvalidArgument", "not a valid run request"},
		{"two objects", request{Method: "POST", Path: "/v1/runs", Body: `{"prompt":"echo a"} {"prompt":"echo b"}`},
			400, "InvalidArgument", "unexpected data after the JSON object"},
		{"trailing garbage", request{Method: "POST", Path: "/v1/runs", Body: `{"prompt":"echo a"}x`},
			400, "InvalidArgument", "not a valid run request"},
		{"oversize trailing data", request{Method: "POST", Path: "/v1/runs", Body: `{"prompt":"echo a"} "` + strings.Repeat("x", 4*limit) + `"`},
			413, "InvalidArgument", "larger than 4096 bytes"},
		{"not an object", request{Method: "POST", Path: "/v1/runs", Body: `["echo hi"]`},
			400, "InvalidArgument", "not a valid run request"},
		{"wrong type", request{Method: "POST", Path: "/v1/runs", Body: `{"prompt":5}`},
			400, "InvalidArgument", "not a valid run request"},
		{"empty approval id", request{Method: "POST", Path: "/v1/runs", Body: `{"prompt":"echo hi","approvals":{"":true}}`},
			400, "InvalidArgument", "empty approval id"},
		{"approvals as an option", request{Method: "POST", Path: "/v1/runs", Body: `{"prompt":"echo hi","options":{"approvals":"{\"a\":true}"}}`},
			400, "InvalidArgument", "is not accepted: give approval answers as approvals"},
		{"approvals not booleans", request{Method: "POST", Path: "/v1/runs", Body: `{"prompt":"echo hi","approvals":{"a":"yes"}}`},
			400, "InvalidArgument", "not a valid run request"},
		{"a run MCP server with neither url nor command", request{Method: "POST", Path: "/v1/runs", Body: `{"prompt":"echo hi","mcpServers":[{"name":"x"}]}`},
			400, "InvalidArgument", "set exactly one of url and command"},
		{"a run MCP server naming an unknown secret", request{Method: "POST", Path: "/v1/runs", Body: `{"prompt":"echo hi","mcpServers":[{"name":"x","command":"x","env":{"K":"${secret:NOPE}"}}]}`},
			400, "InvalidArgument", "NOPE"},
		{"unknown field", request{Method: "POST", Path: "/v1/runs", Body: `{"prompt":"echo hi","bogus":1}`},
			400, "InvalidArgument", `unknown field "bogus"`},
		{"unknown field, streaming", request{Method: "POST", Path: "/v1/runs", Body: `{"prompt":"echo hi","bogus":1}`, Header: stream},
			400, "InvalidArgument", `unknown field "bogus"`},
		{"offset -1", request{Method: "GET", Path: "/v1/runs/" + id + "/events?offset=-1", Header: stream},
			400, "InvalidArgument", `bad offset "-1"`},
		{"offset abc", request{Method: "GET", Path: "/v1/runs/" + id + "/events?offset=abc", Header: stream},
			400, "InvalidArgument", `bad offset "abc"`},
		{"offset abc, JSON", request{Method: "GET", Path: "/v1/runs/" + id + "/events?format=json&offset=abc"},
			400, "InvalidArgument", `bad offset "abc"`},
		{"Last-Event-ID -1", request{Method: "GET", Path: "/v1/runs/" + id + "/events", Header: map[string]string{"Accept": "text/event-stream", "Last-Event-ID": "-1"}},
			400, "InvalidArgument", `bad offset "-1"`},
		{"Last-Event-ID abc", request{Method: "GET", Path: "/v1/runs/" + id + "/events", Header: map[string]string{"Accept": "text/event-stream", "Last-Event-ID": "abc"}},
			400, "InvalidArgument", `bad offset "abc"`},
		{"unknown run", request{Method: "GET", Path: "/v1/runs/run-nope"}, 404, "NotFound", "no such run"},
		{"unknown run events", request{Method: "GET", Path: "/v1/runs/run-nope/events", Header: stream}, 404, "NotFound", "no such run"},
		{"unknown run cancel", request{Method: "POST", Path: "/v1/runs/run-nope/cancel"}, 404, "NotFound", "no such run"},
		{"unknown sandbox", request{Method: "DELETE", Path: "/v1/sandboxes/nope"}, 404, "NotFound", "no such sandbox"},
		{"bad status filter", request{Method: "GET", Path: "/v1/runs?status=bogus"}, 400, "InvalidArgument", `unknown status "bogus"`},
		{"bad limit", request{Method: "GET", Path: "/v1/runs?limit=0"}, 400, "InvalidArgument", "limit must be"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, body := do(t, e.URL, c.req)
			if resp.StatusCode != c.status {
				t.Fatalf("%s %s: %s %s, want %d", c.req.Method, c.req.Path, resp.Status, body, c.status)
			}
			code, msg := apiError(t, resp, body)
			if code != c.code || !strings.Contains(msg, c.msg) {
				t.Errorf("error %s %q, want %s containing %q", code, msg, c.code, c.msg)
			}
			if len(msg) > 300 {
				t.Errorf("message is %d bytes long: %.80q…", len(msg), msg)
			}
			if n := e.runCount(); n != runs {
				t.Fatalf("the store holds %d runs, want %d: a bad request created one", n, runs)
			}
		})
	}
	// Nothing half-made: only the one real run's sandbox exists.
	insts, err := e.Store.ListInstances(context.Background(), store.InstanceFilter{})
	if err != nil || len(insts) != 1 {
		t.Fatalf("instances after bad input: %d %v", len(insts), err)
	}
	entries, err := os.ReadDir(e.BaseDir)
	if err != nil || len(entries) != 1 {
		t.Fatalf("sandbox directories after bad input: %d %v", len(entries), err)
	}

	// The Go client turns the same answers into coded errors.
	c := e.client("")
	ctx := testCtx(t, 30*time.Second)
	for _, tc := range []struct {
		req  api.StartRun
		code sandbox.Code
	}{
		{api.StartRun{Definition: "nope", Prompt: "echo"}, sandbox.NotFound},
		{api.StartRun{Harness: "nope", Prompt: "echo"}, sandbox.InvalidArgument},
		{api.StartRun{Prompt: " "}, sandbox.InvalidArgument},
		{api.StartRun{Prompt: strings.Repeat("x", 2*limit)}, sandbox.InvalidArgument},
	} {
		_, err := c.Start(ctx, tc.req)
		if sandbox.CodeOf(err) != tc.code {
			t.Errorf("client.Start(%+.40v): %v (code %s), want %s", tc.req, err, sandbox.CodeOf(err), tc.code)
		}
	}
	if _, err := c.Run(ctx, "run-nope"); sandbox.CodeOf(err) != sandbox.NotFound {
		t.Errorf("client.Run of an unknown run: %v", err)
	}
	if _, err := c.Cancel(ctx, "run-nope"); sandbox.CodeOf(err) != sandbox.NotFound {
		t.Errorf("client.Cancel of an unknown run: %v", err)
	}
	began := time.Now()
	if err := c.Events(ctx, "run-nope", 0, func(store.Event) error { return nil }); sandbox.CodeOf(err) != sandbox.NotFound {
		t.Errorf("client.Events of an unknown run: %v", err)
	}
	t.Logf("client.Events of an unknown run answered in %v", time.Since(began)) // NotFound is final: the client does not retry it
	if _, err := c.Logs(ctx, "run-nope", 0); sandbox.CodeOf(err) != sandbox.NotFound {
		t.Errorf("client.Logs of an unknown run: %v", err)
	}
	if n := e.runCount(); n != runs {
		t.Fatalf("the store holds %d runs, want %d", n, runs)
	}
}

func TestClientFlows(t *testing.T) {
	e := newEnv(t, envOptions{})
	c := e.client("")
	ctx := testCtx(t, time.Minute)

	defs := struct{ Definitions, Harnesses []string }{}
	resp, body := do(t, e.URL, request{Method: "GET", Path: "/v1/definitions"})
	if resp.StatusCode != 200 || json.Unmarshal(body, &defs) != nil || !slicesEqual(defs.Definitions, []string{"default"}) || !slicesEqual(defs.Harnesses, []string{"command"}) {
		t.Fatalf("/v1/definitions: %s %s", resp.Status, body)
	}

	r, err := c.Start(ctx, api.StartRun{Thread: "t-client", Prompt: fiftyLines})
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != "running" || r.Thread != "t-client" || r.Definition != "default" || r.Harness != "command" {
		t.Fatalf("started run = %+v", r)
	}
	var payloads []string
	var last int64
	if err := c.Events(ctx, r.ID, 0, func(ev store.Event) error {
		if ev.Seq != last+1 {
			return fmt.Errorf("seq %d after %d", ev.Seq, last)
		}
		last = ev.Seq
		payloads = append(payloads, string(ev.Data))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	sameLines(t, textLines(t, payloads), numbered("line", 50))

	got, err := c.Run(ctx, r.ID)
	if err != nil || got.Status != "completed" || got.LastSeq != last {
		t.Fatalf("client.Run = %+v, %v; want completed with lastSeq %d", got, err, last)
	}
	list, err := c.Runs(ctx, client.ListOptions{Thread: "t-client", Statuses: []string{"completed"}})
	if err != nil || len(list) != 1 || list[0].ID != r.ID {
		t.Fatalf("client.Runs = %+v, %v", list, err)
	}
	if _, ok, err := c.Active(ctx, "t-client"); ok || err != nil {
		t.Fatalf("client.Active of a finished thread: ok=%v err=%v", ok, err)
	}
	logs, err := c.Logs(ctx, r.ID, 3)
	if err != nil || int64(len(logs)) != last-3 || logs[0].Seq != 4 || string(logs[0].Data) != payloads[3] {
		t.Fatalf("client.Logs from 3: %d events, %v", len(logs), err)
	}
	// Events from the middle of a finished run.
	var tailSeqs []int64
	if err := c.Events(ctx, r.ID, last-2, func(ev store.Event) error { tailSeqs = append(tailSeqs, ev.Seq); return nil }); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(tailSeqs) != fmt.Sprint([]int64{last - 1, last}) {
		t.Fatalf("events after %d: %v", last-2, tailSeqs)
	}

	sbs, err := c.Sandboxes(ctx)
	if err != nil || len(sbs) != 1 || sbs[0].Thread != "t-client" {
		t.Fatalf("client.Sandboxes = %+v, %v", sbs, err)
	}
	if err := c.DeleteSandbox(ctx, sbs[0].Key); err != nil {
		t.Fatal(err)
	}
	if sbs, err := c.Sandboxes(ctx); err != nil || len(sbs) != 0 {
		t.Fatalf("client.Sandboxes after delete = %+v, %v", sbs, err)
	}
	if err := c.DeleteSandbox(ctx, "nope"); sandbox.CodeOf(err) != sandbox.NotFound {
		t.Fatalf("client.DeleteSandbox of an unknown key: %v", err)
	}

	// Active and cancel of a live run.
	live, err := c.Start(ctx, api.StartRun{Thread: "t-client", Prompt: sleeper})
	if err != nil {
		t.Fatal(err)
	}
	e.waitLine(live.ID, "started", time.Minute)
	act, ok, err := c.Active(ctx, "t-client")
	if err != nil || !ok || act.ID != live.ID {
		t.Fatalf("client.Active = %+v %v %v", act, ok, err)
	}
	began := time.Now()
	if _, err := c.Cancel(ctx, live.ID); err != nil {
		t.Fatal(err)
	}
	// Events ends when the cancelled run ends.
	ectx, cancel := context.WithTimeout(ctx, time.Minute) // a hang guard
	defer cancel()
	if err := c.Events(ectx, live.ID, 0, func(store.Event) error { return nil }); err != nil {
		t.Fatalf("events of the cancelled run: %v", err)
	}
	if got, err := c.Run(ctx, live.ID); err != nil || got.Status != "cancelled" {
		t.Fatalf("after cancel: %+v %v", got, err)
	}
	t.Logf("cancelled and streamed to the end in %v", time.Since(began))
}

// cutter wraps a handler so the first n event streams (GET …/events, or a
// POST /v1/runs that streams) are cut (the TCP
// connection closed under the response) after `after` events each.
type cutter struct {
	h      http.Handler
	after  int
	mu     sync.Mutex
	left   int // streams still to cut
	cuts   int // streams cut
	served int // event streams served
}

func (c *cutter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	stream := strings.HasSuffix(r.URL.Path, "/events") || r.Method == http.MethodPost && r.URL.Path == "/v1/runs"
	if !stream || !strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
		c.h.ServeHTTP(w, r)
		return
	}
	c.mu.Lock()
	c.served++
	cut := c.left > 0
	if cut {
		c.left--
	}
	c.mu.Unlock()
	if !cut {
		c.h.ServeHTTP(w, r)
		return
	}
	cw := &cuttingWriter{ResponseWriter: w, left: c.after, onCut: func() {
		c.mu.Lock()
		c.cuts++
		c.mu.Unlock()
	}}
	c.h.ServeHTTP(cw, r)
}

var errCut = errors.New("test: connection cut")

type cuttingWriter struct {
	http.ResponseWriter
	mu    sync.Mutex
	left  int
	cut   bool
	onCut func()
}

func (w *cuttingWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cut {
		return 0, errCut
	}
	// The server writes a batch of events at once: the cut falls after
	// the left-th event, wherever it is in p.
	starts := eventStarts(p)
	if len(starts) < w.left || w.left <= 0 {
		w.left -= len(starts)
		return w.ResponseWriter.Write(p)
	}
	end := len(p)
	if len(starts) > w.left {
		end = starts[w.left]
	}
	n, err := w.ResponseWriter.Write(p[:end])
	w.left = 0
	w.ResponseWriter.(http.Flusher).Flush()
	conn, _, herr := w.ResponseWriter.(http.Hijacker).Hijack()
	if herr == nil {
		_ = conn.Close()
	}
	w.cut = true
	w.onCut()
	if err == nil && n < len(p) {
		err = errCut
	}
	return n, err
}

// eventStarts returns the offsets in p of the SSE events' "id: " lines.
func eventStarts(p []byte) []int {
	var out []int
	for i := 0; i < len(p); {
		if bytes.HasPrefix(p[i:], []byte("id: ")) && (i == 0 || p[i-1] == '\n') {
			out = append(out, i)
		}
		j := bytes.IndexByte(p[i:], '\n')
		if j < 0 {
			break
		}
		i += j + 1
	}
	return out
}

func (w *cuttingWriter) Flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.cut {
		w.ResponseWriter.(http.Flusher).Flush()
	}
}

// inOrder collects a stream's payloads, refusing a gap or a repeat.
type inOrder struct {
	last     int64
	payloads []string
}

func (o *inOrder) add(ev store.Event) error {
	if ev.Seq != o.last+1 {
		return fmt.Errorf("seq %d after %d: a gap or a repeat", ev.Seq, o.last)
	}
	o.last = ev.Seq
	o.payloads = append(o.payloads, string(ev.Data))
	return nil
}

func TestClientEventsResumeAfterDroppedStream(t *testing.T) {
	const lines = 400
	agent := fmt.Sprintf(`i=1; while [ $i -le %d ]; do echo n$i; [ $((i%%50)) -eq 0 ] && sleep 0.1; i=$((i+1)); done`, lines)
	for _, tc := range []struct {
		name        string
		live        bool // stream while the run goes, or replay a finished one
		cuts, after int
	}{
		{"live, one cut", true, 1, 25},
		{"live, three cuts", true, 3, 40},
		{"replay, two cuts", false, 2, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cut := &cutter{after: tc.after}
			e := newEnv(t, envOptions{Wrap: func(h http.Handler) http.Handler { cut.h = h; return cut }})
			c := e.client("")
			c.Retry = 20 * time.Second
			ctx := testCtx(t, time.Minute)
			r, err := c.Start(ctx, api.StartRun{Prompt: agent})
			if err != nil {
				t.Fatal(err)
			}
			if !tc.live {
				e.waitStatus(r.ID, store.RunCompleted, time.Minute)
			}
			cut.mu.Lock()
			cut.left = tc.cuts
			cut.mu.Unlock()
			var ip inOrder
			err = c.Events(ctx, r.ID, 0, ip.add)
			if err != nil {
				t.Fatal(err)
			}
			payloads, last := ip.payloads, ip.last
			sameLines(t, textLines(t, payloads), numbered("n", lines))
			stored, _ := e.Store.LastSeq(ctx, r.ID)
			if last != stored {
				t.Fatalf("got events up to %d, the log has %d", last, stored)
			}
			cut.mu.Lock()
			defer cut.mu.Unlock()
			if cut.cuts != tc.cuts || cut.served != tc.cuts+1 {
				t.Fatalf("%d streams cut, %d served; want %d cut and %d served", cut.cuts, cut.served, tc.cuts, tc.cuts+1)
			}
			if tc.live {
				e.waitStatus(r.ID, store.RunCompleted, time.Minute)
			}
		})
	}
}

// TestClientStartEvents: StartEvents starts a run and follows it on one
// request; a stream cut mid-run (the POST's, then a reconnection's) goes
// on from the last event, each event delivered once; a refused start
// calls nothing back.
func TestClientStartEvents(t *testing.T) {
	const lines = 300
	agent := fmt.Sprintf(`i=1; while [ $i -le %d ]; do echo n$i; [ $((i%%50)) -eq 0 ] && sleep 0.1; i=$((i+1)); done`, lines)
	for _, tc := range []struct {
		name        string
		cuts, after int
	}{
		{"whole", 0, 0},
		{"the POST's stream cut", 1, 30},
		{"the POST's and a reconnection's cut", 2, 60},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cut := &cutter{after: tc.after, left: tc.cuts}
			e := newEnv(t, envOptions{Wrap: func(h http.Handler) http.Handler { cut.h = h; return cut }})
			c := e.client("")
			c.Retry = 20 * time.Second
			ctx := testCtx(t, time.Minute)
			var startedID, startedThread string
			var ip inOrder
			id, err := c.StartEvents(ctx, api.StartRun{Thread: "t-se", Prompt: agent}, func(id, thread string) {
				if ip.last != 0 {
					t.Errorf("started called after event %d", ip.last)
				}
				startedID, startedThread = id, thread
			}, ip.add)
			if err != nil {
				t.Fatal(err)
			}
			if id == "" || startedID != id || startedThread != "t-se" {
				t.Fatalf("StartEvents returned %q; started(%q, %q)", id, startedID, startedThread)
			}
			sameLines(t, textLines(t, ip.payloads), numbered("n", lines))
			rec := e.waitStatus(id, store.RunCompleted, time.Minute)
			if stored, _ := e.Store.LastSeq(ctx, rec.ID); ip.last != stored {
				t.Fatalf("got events up to %d, the log has %d", ip.last, stored)
			}
			cut.mu.Lock()
			defer cut.mu.Unlock()
			if cut.cuts != tc.cuts || cut.served != tc.cuts+1 {
				t.Fatalf("%d streams cut, %d served; want %d cut and %d served", cut.cuts, cut.served, tc.cuts, tc.cuts+1)
			}
		})
	}
	t.Run("refused", func(t *testing.T) {
		e := newEnv(t, envOptions{})
		called := false
		id, err := e.client("").StartEvents(testCtx(t, time.Minute), api.StartRun{Harness: "nope", Prompt: "hi"},
			func(string, string) { called = true }, func(store.Event) error { called = true; return nil })
		if sandbox.CodeOf(err) != sandbox.InvalidArgument || id != "" || called {
			t.Fatalf("StartEvents of an unknown harness = %q, %v (called back: %v); want InvalidArgument, nothing called", id, err, called)
		}
		if n := e.runCount(); n != 0 {
			t.Fatalf("%d runs stored", n)
		}
	})
}
