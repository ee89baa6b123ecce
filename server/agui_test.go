package server_test

// The daemon as an AG-UI backend, checked with the official packages
// (internal/aguitest: @ag-ui/core's schemas, @ag-ui/client's enforceEvents,
// verifyEvents and HttpAgent).

import (
	"net/http"
	"testing"
	"time"

	"github.com/d10ffeed/corral/api"
	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/internal/aguitest"
	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
)

// sseFrames returns every data payload of a stream, as an AG-UI client
// reads them (whatever their SSE event name).
func sseFrames(evs []sse) []string {
	var out []string
	for _, e := range evs {
		if e.Data != "" {
			out = append(out, e.Data)
		}
	}
	return out
}

// TestAGUIEventsOfEveryRunKind streams runs of every kind the daemon
// produces (output, no output with a diff, stderr only, failing,
// cancelled, asking for approval, answered) and checks every frame a
// client receives with the official schemas and every run with
// verifyEvents.
func TestAGUIEventsOfEveryRunKind(t *testing.T) {
	e := newEnv(t, envOptions{Extra: []harness.Harness{asker{}}})
	repo := testutil.BareRepo(t, map[string]string{"README.md": "a repository\n"})
	g := newEnv(t, envOptions{Workspace: &sandbox.Workspace{Source: &sandbox.Source{Git: repo}}})
	kinds := []struct {
		name, harness, prompt, thread string
		approvals                     map[string]bool
		status                        store.RunStatus
		cancel                        bool
		git                           bool // in a git workspace: the run ends with its diff
	}{
		{name: "command", prompt: fiftyLines, status: store.RunCompleted},
		{name: "no-output-diff", prompt: "echo new > f.txt", status: store.RunCompleted, git: true},
		{name: "output-diff", prompt: "echo changed; echo more >> README.md", status: store.RunCompleted, git: true},
		{name: "stderr-only", prompt: "echo oops >&2", status: store.RunCompleted},
		{name: "failing", prompt: "echo failing; exit 3", status: store.RunFailed},
		{name: "cancelled", prompt: sleeper, status: store.RunCancelled, cancel: true},
		{name: "approval", harness: "asker", prompt: "deploy", thread: "t-ask", status: store.RunCompleted},
		{name: "approval-answered", harness: "asker", prompt: "deploy", thread: "t-ask", approvals: map[string]bool{askID: true}, status: store.RunCompleted},
	}
	var runs []aguitest.Run
	for _, k := range kinds {
		e := e
		if k.git {
			e = g
		}
		id := e.startJSON("", jsonBody(t, api.StartRun{Harness: k.harness, Thread: k.thread, Prompt: k.prompt, Approvals: k.approvals}))
		if k.cancel {
			e.waitLine(id, "started", time.Minute)
			if resp, body := do(t, e.URL, request{Method: "POST", Path: "/v1/runs/" + id + "/cancel"}); resp.StatusCode != http.StatusAccepted {
				t.Fatalf("cancel: %s %s", resp.Status, body)
			}
		}
		e.waitStatus(id, k.status, time.Minute)
		runs = append(runs, aguitest.RunOfFrames(k.name, sseFrames(streamAll(t, e, id, 0, false))))
	}
	aguitest.Require(t, runs...)
}
