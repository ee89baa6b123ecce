package server_test

// Tenants: bearer tokens map to tenants, and a tenant sees nothing of
// another's — a foreign run is "not found" (404), never "forbidden" (403),
// so ids don't leak. /metrics needs a token too. And the daemon refuses to
// listen beyond loopback without tokens.

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/d10ffeed/corral/api"
	"github.com/d10ffeed/corral/client"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/server"
	"github.com/d10ffeed/corral/store"
)

func TestTenantIsolation(t *testing.T) {
	e := newEnv(t, envOptions{Tokens: map[string]string{"a-token": "acme", "b-token": "beta"}})
	ctx := testCtx(t, time.Minute)

	// No token, a bad token, a token of the wrong scheme: 401 with a JSON
	// body and a WWW-Authenticate challenge, on every API route.
	for _, path := range []string{"/v1/runs", "/v1/definitions", "/v1/sandboxes", "/v1/runs/x", "/v1/runs/x/events", "/v1/threads/x/active"} {
		for _, hdr := range []map[string]string{nil, {"Authorization": "Bearer nope"}, {"Authorization": "Basic a-token"}, {"Authorization": "Bearer "}} {
			resp, body := do(t, e.URL, request{Method: "GET", Path: path, Header: hdr})
			if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
				t.Fatalf("GET %s with %v: %s %s, want 401 with a challenge", path, hdr, resp.Status, body)
			}
			apiError(t, resp, body)
		}
	}
	for _, r := range []request{
		{Method: "POST", Path: "/v1/runs", Body: `{"prompt":"echo hi"}`},
		{Method: "POST", Path: "/v1/runs", Body: `{"prompt":"echo hi"}`, Token: "acme"}, // a tenant name is not a token
		{Method: "POST", Path: "/v1/runs/x/cancel", Token: "nope"},
		{Method: "DELETE", Path: "/v1/sandboxes/x"},
		{Method: "GET", Path: "/v1/runs?access_token=nope"},
	} {
		resp, body := do(t, e.URL, r)
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("%s %s (token %q): %s %s, want 401", r.Method, r.Path, r.Token, resp.Status, body)
		}
	}
	if n := e.runCount(); n != 0 {
		t.Fatalf("unauthenticated requests created %d runs", n)
	}
	// The page and health need no token (the page asks for one); metrics
	// do, as the API does.
	for _, path := range []string{"/", "/healthz"} {
		if resp, _ := do(t, e.URL, request{Method: "GET", Path: path}); resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s without a token: %s", path, resp.Status)
		}
	}
	for _, tok := range []string{"", "nope", "acme"} {
		if resp, body := do(t, e.URL, request{Method: "GET", Path: "/metrics", Token: tok}); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("GET /metrics with token %q: %s, want 401", tok, resp.Status)
		} else {
			apiError(t, resp, body)
		}
	}
	if resp, body := do(t, e.URL, request{Method: "GET", Path: "/metrics", Token: "b-token"}); resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "corral_runs_started_total") {
		t.Fatalf("GET /metrics with a token: %s", resp.Status)
	}

	a, b := e.client("a-token"), e.client("b-token")
	if _, err := e.client("nope").Runs(ctx, client.ListOptions{}); sandbox.CodeOf(err) != sandbox.PermissionDenied {
		t.Fatalf("client with a bad token: %v, want PermissionDenied", err)
	}
	runA, err := a.Start(ctx, api.StartRun{Thread: "shared-thread", Prompt: sleeper})
	if err != nil {
		t.Fatal(err)
	}
	e.waitLine(runA.ID, "started", time.Minute)
	if rec, _, _ := e.Store.GetRun(ctx, runA.ID); rec.Tenant != "acme" {
		t.Fatalf("run of a-token has tenant %q, want acme", rec.Tenant)
	}

	// B cannot list it, read it, see it as its thread's active run, read or
	// attach to its events, or cancel it: 404 each time, as for a run that
	// does not exist.
	if runs, err := b.Runs(ctx, client.ListOptions{}); err != nil || len(runs) != 0 {
		t.Fatalf("B lists %d runs (%v), want none", len(runs), err)
	}
	if _, ok, err := b.Active(ctx, "shared-thread"); ok || err != nil {
		t.Fatalf("B sees an active run on A's thread name: ok=%v err=%v", ok, err)
	}
	if sbs, err := b.Sandboxes(ctx); err != nil || len(sbs) != 0 {
		t.Fatalf("B lists %d sandboxes (%v), want none", len(sbs), err)
	}
	notFound := func(r request) {
		t.Helper()
		resp, body := do(t, e.URL, r)
		if resp.StatusCode != http.StatusNotFound {
			t.Fatalf("B: %s %s: %s %s, want 404", r.Method, r.Path, resp.Status, body)
		}
		code, msg := apiError(t, resp, body)
		// The same answer as for a run that does not exist (but the id).
		ghost := strings.Replace(r.Path, runA.ID, "run-ghost", 1)
		resp2, body2 := do(t, e.URL, request{Method: r.Method, Path: ghost, Header: r.Header, Token: r.Token})
		code2, msg2 := apiError(t, resp2, body2)
		if resp2.StatusCode != resp.StatusCode || code2 != code || strings.ReplaceAll(msg, runA.ID, "run-ghost") != msg2 {
			t.Fatalf("B: a foreign run answers %d %s %q, a missing one %d %s %q", resp.StatusCode, code, msg, resp2.StatusCode, code2, msg2)
		}
	}
	stream := map[string]string{"Accept": "text/event-stream"}
	notFound(request{Method: "GET", Path: "/v1/runs/" + runA.ID, Token: "b-token"})
	notFound(request{Method: "GET", Path: "/v1/runs/" + runA.ID + "/events", Header: stream, Token: "b-token"})
	notFound(request{Method: "GET", Path: "/v1/runs/" + runA.ID + "/events?offset=1", Header: stream, Token: "b-token"})
	notFound(request{Method: "GET", Path: "/v1/runs/" + runA.ID + "/events?format=json", Token: "b-token"})
	notFound(request{Method: "GET", Path: "/v1/runs/" + runA.ID + "/events?access_token=b-token", Header: stream})
	notFound(request{Method: "POST", Path: "/v1/runs/" + runA.ID + "/cancel", Token: "b-token"})
	notFound(request{Method: "DELETE", Path: "/v1/sandboxes/" + runA.SandboxKey, Token: "b-token"})
	if _, err := b.Run(ctx, runA.ID); sandbox.CodeOf(err) != sandbox.NotFound {
		t.Fatalf("B client.Run: %v", err)
	}
	if _, err := b.Cancel(ctx, runA.ID); sandbox.CodeOf(err) != sandbox.NotFound {
		t.Fatalf("B client.Cancel: %v", err)
	}
	if err := b.Events(ctx, runA.ID, 0, func(store.Event) error { return nil }); sandbox.CodeOf(err) != sandbox.NotFound {
		t.Fatalf("B client.Events: %v", err)
	}
	if _, err := b.Logs(ctx, runA.ID, 0); sandbox.CodeOf(err) != sandbox.NotFound {
		t.Fatalf("B client.Logs: %v", err)
	}
	// B's attempts changed nothing: A's run still runs, uncancelled, with
	// its sandbox.
	got, err := a.Run(ctx, runA.ID)
	if err != nil || got.Status != "running" || got.CancelRequested != nil {
		t.Fatalf("A's run after B's attempts: %+v %v", got, err)
	}
	if sbs, err := a.Sandboxes(ctx); err != nil || len(sbs) != 1 {
		t.Fatalf("A's sandboxes: %+v %v", sbs, err)
	}

	// B's own run on a thread of the same name is B's alone.
	runB, err := b.Start(ctx, api.StartRun{Thread: "shared-thread", Prompt: "echo b"})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Events(ctx, runB.ID, 0, func(store.Event) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if runB.SandboxKey == runA.SandboxKey {
		t.Fatalf("two tenants share the sandbox key %s", runA.SandboxKey)
	}
	if runs, err := b.Runs(ctx, client.ListOptions{}); err != nil || len(runs) != 1 || runs[0].ID != runB.ID {
		t.Fatalf("B lists %+v (%v), want its own run only", runs, err)
	}
	if runs, err := a.Runs(ctx, client.ListOptions{}); err != nil || len(runs) != 1 || runs[0].ID != runA.ID {
		t.Fatalf("A lists %+v (%v), want its own run only", runs, err)
	}
	if _, err := a.Run(ctx, runB.ID); sandbox.CodeOf(err) != sandbox.NotFound {
		t.Fatalf("A reads B's run: %v", err)
	}
	if act, ok, err := a.Active(ctx, "shared-thread"); err != nil || !ok || act.ID != runA.ID {
		t.Fatalf("A's active run on the shared thread name: %+v %v %v", act, ok, err)
	}

	// access_token (what EventSource can send) works for the owner.
	resp, body := do(t, e.URL, request{Method: "GET", Path: "/v1/runs/" + runB.ID + "/events?access_token=b-token", Header: stream})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("events with access_token: %s %s", resp.Status, body)
	}
	checkStream(t, readSSE(t, body), 1)

	// A cancels its own run.
	if _, err := a.Cancel(ctx, runA.ID); err != nil {
		t.Fatal(err)
	}
	e.waitStatus(runA.ID, store.RunCancelled, time.Minute)
	resp, body = do(t, e.URL, request{Method: "GET", Path: "/v1/runs/" + runA.ID, Token: "a-token"})
	var r api.Run
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &r) != nil || r.Status != "cancelled" {
		t.Fatalf("A's run after A's cancel: %s %s", resp.Status, body)
	}
}

func TestCheckListen(t *testing.T) {
	toks := map[string]string{"t": "acme"}
	for _, c := range []struct {
		addr   string
		tokens map[string]string
		ok     bool
	}{
		{"0.0.0.0:7777", nil, false},
		{"10.1.2.3:80", nil, false},
		{":7777", nil, false},
		{"[::]:7777", nil, false},
		{"example.com:80", nil, false},
		{"127.0.0.1", nil, false}, // no port: not an address
		{"127.0.0.1:0", nil, true},
		{"127.0.0.1:7777", nil, true},
		{"127.1.2.3:80", nil, true},
		{"[::1]:0", nil, true},
		{"localhost:0", nil, true},
		{"0.0.0.0:7777", toks, true},
		{"10.1.2.3:80", toks, true},
		{":7777", toks, true},
	} {
		err := server.CheckListen(c.addr, c.tokens)
		if (err == nil) != c.ok {
			t.Errorf("CheckListen(%q, %d tokens) = %v, want ok=%v", c.addr, len(c.tokens), err, c.ok)
		}
		if err != nil && c.ok == false && strings.Contains(c.addr, ":") && !strings.Contains(err.Error(), c.addr) {
			t.Errorf("CheckListen(%q): the error does not name the address: %v", c.addr, err)
		}
	}
}
