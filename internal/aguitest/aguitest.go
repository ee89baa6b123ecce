// Package aguitest checks corral's events with the official AG-UI packages
// (@ag-ui/core's EventSchemas, @ag-ui/client's enforceEvents, verifyEvents
// and HttpAgent), which scripts/setup-agents.sh installs pinned under
// $CORRAL_AGENTS_DIR. The checker is check.js, run with node; no build
// step. A missing node or package skips the test naming the script, and
// fails it under CI=true (testutil.Unavailable).
package aguitest

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/internal/testutil"
)

//go:embed check.js
var checkJS []byte

// Run is one run's events, in order, as a client receives them.
type Run struct {
	Name   string            `json:"name"`
	Events []json.RawMessage `json:"events"`
}

// RunOf encodes events as a Run.
func RunOf(name string, evs []event.Event) Run {
	r := Run{Name: name}
	for _, e := range evs {
		r.Events = append(r.Events, e.Marshal())
	}
	return r
}

// RunOfFrames makes a Run of SSE data payloads.
func RunOfFrames(name string, payloads []string) Run {
	r := Run{Name: name}
	for _, p := range payloads {
		r.Events = append(r.Events, json.RawMessage(p))
	}
	return r
}

// Failure is one frame (Index ≥ 0) or one run (Index -1, Type
// "verifyEvents") the official packages rejected.
type Failure struct {
	Run   string `json:"run"`
	Index int    `json:"index"`
	Type  string `json:"type"`
	Why   string `json:"why"`
}

// Result counts what passed.
type Result struct {
	Frames       int       `json:"frames"`
	FramesPassed int       `json:"framesPassed"`
	Runs         int       `json:"runs"`
	RunsPassed   int       `json:"runsPassed"`
	Failures     []Failure `json:"failures"`
}

// String is the figure the tests log.
func (r Result) String() string {
	return fmt.Sprintf("%d of %d frames pass @ag-ui/core's EventSchemas (nothing stripped by enforceEvents), %d of %d runs pass whole (every frame, and @ag-ui/client's verifyEvents)",
		r.FramesPassed, r.Frames, r.RunsPassed, r.Runs)
}

var (
	scriptOnce sync.Once
	scriptPath string
	scriptErr  error
)

// script writes check.js to a temporary file once per test binary.
func script() (string, error) {
	scriptOnce.Do(func() {
		dir, err := os.MkdirTemp("", "corral-aguitest-")
		if err != nil {
			scriptErr = err
			return
		}
		scriptPath = filepath.Join(dir, "check.js")
		scriptErr = os.WriteFile(scriptPath, checkJS, 0o644)
	})
	return scriptPath, scriptErr
}

// modules returns the node_modules directory that holds the AG-UI
// packages, or skips (fails under CI=true).
func modules(t testing.TB) string {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		testutil.Unavailable(t, "node is not installed: the AG-UI checks need it (apt-get install nodejs), then run scripts/setup-agents.sh")
	}
	dir := os.Getenv("CORRAL_AGENTS_DIR")
	if dir == "" {
		dir = "/opt/corral-agents"
	}
	nm := filepath.Join(dir, "node_modules")
	for _, p := range []string{"@ag-ui/core", "@ag-ui/client"} {
		if _, err := os.Stat(filepath.Join(nm, p, "package.json")); err != nil {
			testutil.Unavailable(t, p+" is not installed in "+nm+": run scripts/setup-agents.sh")
		}
	}
	return nm
}

// node runs check.js in mode on input and decodes its output into out.
func node(t testing.TB, mode string, input, out any) {
	t.Helper()
	nm := modules(t)
	js, err := script()
	if err != nil {
		t.Fatal(err)
	}
	in, err := json.Marshal(input)
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "input.json")
	if err := os.WriteFile(f, in, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("node", js, mode, f)
	cmd.Env = append(os.Environ(), "NODE_PATH="+nm, "NO_COLOR=1")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("node check.js %s: %v\n%s", mode, err, stderr.String())
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("node check.js %s: bad output %q: %v", mode, b, err)
	}
}

// Verify checks the runs and returns the counts; it does not fail the
// test (see Require).
func Verify(t testing.TB, runs ...Run) Result {
	t.Helper()
	var r Result
	node(t, "verify", map[string]any{"runs": runs}, &r)
	return r
}

// Require checks the runs, logs the counts and fails the test on any
// rejected frame or run, naming each.
func Require(t testing.TB, runs ...Run) Result {
	t.Helper()
	r := Verify(t, runs...)
	t.Logf("AG-UI: %s", r)
	for _, f := range r.Failures {
		t.Errorf("AG-UI rejects %s event %d (%s): %s", f.Run, f.Index, f.Type, f.Why)
	}
	return r
}

// Step is one HttpAgent.runAgent call of Drive. Steps with the same Agent
// share one HttpAgent (so its pending interrupts carry over).
type Step struct {
	Agent          string            `json:"agent"`
	ThreadID       string            `json:"threadId,omitempty"`
	RunID          string            `json:"runId,omitempty"`
	Prompt         *string           `json:"prompt,omitempty"`
	ForwardedProps map[string]any    `json:"forwardedProps,omitempty"`
	Resume         []map[string]any  `json:"resume,omitempty"`
	AbortAfter     int               `json:"abortAfter,omitempty"`
	Headers        map[string]string `json:"headers,omitempty"`
}

// StepResult is what one runAgent call received.
type StepResult struct {
	Events            []json.RawMessage `json:"events"`
	Error             string            `json:"error"`
	Warnings          []string          `json:"warnings"`
	NewMessages       []json.RawMessage `json:"newMessages"`
	PendingInterrupts []json.RawMessage `json:"pendingInterrupts"`
}

// Types returns the event types received, in order.
func (s StepResult) Types() []string {
	var out []string
	for _, e := range s.Events {
		var v struct {
			Type string `json:"type"`
		}
		_ = json.Unmarshal(e, &v)
		out = append(out, v.Type)
	}
	return out
}

// Drive runs the steps with the official HttpAgent against url (POST, the
// bearer token in a header) and returns what each received.
func Drive(t testing.TB, url, token string, steps ...Step) []StepResult {
	t.Helper()
	var out struct {
		Steps []StepResult `json:"steps"`
	}
	node(t, "drive", map[string]any{"url": url, "token": token, "steps": steps}, &out)
	return out.Steps
}
