package server_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/d10ffeed/corral/api"
	"github.com/d10ffeed/corral/store"
)

// TestRunListFields: the run list says, per run, what the console shows —
// harness, provider, sandbox, start, duration and exit code — and filters
// by status and thread; the sandbox list says each sandbox's state.
func TestRunListFields(t *testing.T) {
	e := newEnv(t, envOptions{})
	// One after the other, so "newest first" is one order.
	ok := e.startJSON("", jsonBody(t, api.StartRun{Prompt: "echo fine"}))
	e.waitStatus(ok, store.RunCompleted, time.Minute)
	bad := e.startJSON("", jsonBody(t, api.StartRun{Prompt: "echo oops >&2; exit 3"}))
	e.waitStatus(bad, store.RunFailed, time.Minute)
	okRec, _, _ := e.Store.GetRun(testCtx(t, time.Minute), ok)
	held := e.startJSON("", jsonBody(t, api.StartRun{Prompt: "sleep 30", Thread: okRec.ThreadID}))

	list := func(query string) []api.Run {
		t.Helper()
		resp, body := do(t, e.URL, request{Method: "GET", Path: "/v1/runs" + query})
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /v1/runs%s: %s %s", query, resp.Status, body)
		}
		var out api.Runs
		if err := json.Unmarshal(body, &out); err != nil {
			t.Fatal(err)
		}
		return out.Runs
	}
	byID := map[string]api.Run{}
	for _, r := range list("") {
		byID[r.ID] = r
	}
	for _, tc := range []struct {
		id, status, prompt string
		exit               int
		finished           bool
	}{{ok, "completed", "echo fine", 0, true}, {bad, "failed", "echo oops >&2; exit 3", 3, true}, {held, "running", "sleep 30", -1, false}} {
		r, found := byID[tc.id]
		if !found {
			t.Fatalf("run %s is not listed", tc.id)
		}
		if r.Harness != "command" || r.Provider != "local" || r.SandboxKey == "" || r.CreatedAt.IsZero() || r.Status != tc.status {
			t.Errorf("run %s: harness %q provider %q sandbox %q created %v status %q", tc.id, r.Harness, r.Provider, r.SandboxKey, r.CreatedAt, r.Status)
		}
		if r.Prompt != tc.prompt {
			t.Errorf("run %s: prompt %q, want %q (any client shows it)", tc.id, r.Prompt, tc.prompt)
		}
		if tc.finished != (r.DurationMS != nil) || tc.finished != (r.ExitCode != nil) {
			t.Fatalf("run %s (%s): durationMs %v exitCode %v", tc.id, r.Status, r.DurationMS, r.ExitCode)
		}
		if tc.finished && *r.ExitCode != tc.exit {
			t.Errorf("run %s: exit %d, want %d", tc.id, *r.ExitCode, tc.exit)
		}
		dur := "running"
		if r.DurationMS != nil {
			dur = (time.Duration(*r.DurationMS) * time.Millisecond).String()
		}
		t.Logf("%s: %s on %s in sandbox %s…, started %s, %s", r.Status, r.Harness, r.Provider, r.SandboxKey[:8], r.CreatedAt.Format(time.TimeOnly), dur)
	}
	if bad := byID[bad]; bad.Error == "" {
		t.Errorf("the failed run carries no error (its stderr tail)")
	} else {
		t.Logf("the failed run's error: %q", bad.Error)
	}
	for _, tc := range []struct {
		query string
		want  []string
	}{
		{"?status=failed", []string{bad}},
		{"?status=running", []string{held}},
		{"?status=completed,failed", []string{bad, ok}},
		{"?thread=" + okRec.ThreadID, []string{held, ok}},
		{"?thread=" + okRec.ThreadID + "&status=completed", []string{ok}},
	} {
		got := list(tc.query)
		var ids []string
		for _, r := range got {
			ids = append(ids, r.ID)
		}
		if len(ids) != len(tc.want) {
			t.Fatalf("%s lists %v, want %v", tc.query, ids, tc.want)
		}
		for i := range ids {
			if ids[i] != tc.want[i] {
				t.Fatalf("%s lists %v, want %v (newest first)", tc.query, ids, tc.want)
			}
		}
		t.Logf("%s: %d runs", tc.query, len(ids))
	}
	// The thread's sandbox is busy while the held run uses it; another is idle.
	resp, body := do(t, e.URL, request{Method: "GET", Path: "/v1/sandboxes"})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/sandboxes: %s %s", resp.Status, body)
	}
	var sbs api.Sandboxes
	if err := json.Unmarshal(body, &sbs); err != nil {
		t.Fatal(err)
	}
	states := map[string]string{}
	for _, sb := range sbs.Sandboxes {
		states[sb.Key] = sb.State
		if sb.Key == byID[held].SandboxKey && sb.RunningRunID != held {
			t.Errorf("the busy sandbox names run %q, want %s", sb.RunningRunID, held)
		}
	}
	if states[byID[held].SandboxKey] != "busy" || states[byID[bad].SandboxKey] != "idle" {
		t.Errorf("sandbox states %v: want the held run's busy, the failed run's idle", states)
	}
	t.Logf("sandbox states: %v", states)
}
