package acp_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/harness/acp"
	"github.com/d10ffeed/corral/provider/local"
	"github.com/d10ffeed/corral/run"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
	"github.com/d10ffeed/corral/store/memstore"
)

// replicas is what the corral processes (runners) of a test share: one
// store, one local sandbox definition "d" with the policy and a workspace
// holding input.txt, one journal directory.
type replicas struct {
	st       store.Store
	def      *sandbox.Definition
	journals string
}

func newReplicas(t *testing.T, policy *sandbox.Policy) *replicas {
	t.Helper()
	p, err := local.New(local.Options{BaseDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	st := memstore.New(memstore.Options{})
	t.Cleanup(func() { st.Close() })
	return &replicas{st: st, journals: t.TempDir(), def: &sandbox.Definition{ID: "d", Provider: p, Policy: policy,
		Workspace: &sandbox.Workspace{Skills: []sandbox.Skill{{Path: "input.txt", Content: "from the workspace\n"}}}}}
}

// runner is one more corral process on the shared store, driving h.
func (w *replicas) runner(t *testing.T, h *acp.Harness) *run.Runner {
	t.Helper()
	r, err := run.New(w.st, []*sandbox.Definition{w.def}, []harness.Harness{h}, run.Options{
		JournalDir: w.journals, LeaseTTL: 2 * time.Second, PollInterval: 50 * time.Millisecond, CancelCheck: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	return r
}

// newRunner is a runner of its own world.
func newRunner(t *testing.T, h *acp.Harness, policy *sandbox.Policy) *run.Runner {
	t.Helper()
	return newReplicas(t, policy).runner(t, h)
}

// askCase is a case of the tests of a permission request the policy asks
// about (echo * with askPolicy(def)), waiting up to wait for answer.
type askCase struct {
	name    string
	def     sandbox.Decision // the policy's default; echo * asks
	wait    time.Duration
	answer  *bool // nil: nobody answers
	wantRan bool
	wantBy  string
}

// echoApproval is the approval id of the scripted agent's echo hello.
const echoApproval = "acp:command:echo hello"

// askPolicy asks about echo *, allows file writes and decides the rest by
// def.
func askPolicy(def sandbox.Decision) *sandbox.Policy {
	return &sandbox.Policy{Commands: sandbox.CommandRules{Ask: []string{"echo *"}}, FileWrite: sandbox.Allow, Default: def}
}

func follow(t *testing.T, ctx context.Context, r *run.Runner, id string) []event.Event {
	t.Helper()
	var evs []event.Event
	if err := r.Follow(ctx, id, 0, func(e store.Event) error {
		ev, err := event.Unmarshal(e.Data)
		if err != nil {
			return err
		}
		evs = append(evs, ev)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return evs
}

// TestThroughTheRunner runs the scripted agent as corral runs any agent:
// run.Runner, a store, a local sandbox. The thread's second run asks the
// agent for the first run's session.
func TestThroughTheRunner(t *testing.T) {
	bin := agent(t)
	h := newHarness(t)
	r := newRunner(t, h, &sandbox.Policy{Default: sandbox.Allow})
	ctx := testCtx(t)
	first, err := r.Start(ctx, run.StartRequest{Definition: "d", Thread: "th", Harness: acp.Name, Prompt: "first", Args: []string{bin}})
	if err != nil {
		t.Fatal(err)
	}
	evs := follow(t, ctx, r, first.ID)
	checkWellFormed(t, evs)
	if last(evs).Type != event.RunFinished {
		t.Fatalf("first run: %s", dump(evs))
	}
	if got := text(evs, event.TextMessageContent); got != "Working on: first input.txt: from the workspaceDone." {
		t.Errorf("text = %q", got)
	}
	if tc := toolCalls(t, evs)["call-1"]; tc == nil || tc.result != "hello\n" {
		t.Errorf("command = %+v", tc)
	}
	rec, _, err := r.Store().GetRun(ctx, first.ID)
	if err != nil || rec.Status != store.RunCompleted {
		t.Errorf("first run record = %+v, %v", rec, err)
	}

	second, err := r.Start(ctx, run.StartRequest{Definition: "d", Thread: "th", Harness: acp.Name, Prompt: "second", Args: []string{bin}})
	if err != nil {
		t.Fatal(err)
	}
	evs = follow(t, ctx, r, second.ID)
	nr := customs(evs, acp.EventSessionNotResumed)
	var v map[string]string
	if len(nr) != 1 || json.Unmarshal(nr[0], &v) != nil || v["previous"] != "sess-1" {
		t.Errorf("the second run asks for the first run's session: %s", nr)
	}
}

// TestCancelThroughTheRunner cancels a turn in progress: the runner kills
// the journaled relay (and the agent with it), and the client ends.
func TestCancelThroughTheRunner(t *testing.T) {
	bin := agent(t)
	h := newHarness(t)
	r := newRunner(t, h, nil)
	ctx := testCtx(t)
	rec, err := r.Start(ctx, run.StartRequest{Definition: "d", Thread: "th", Harness: acp.Name, Prompt: "p", Args: []string{bin, "-hang"}})
	if err != nil {
		t.Fatal(err)
	}
	var evs []event.Event
	cancelled := false
	err = r.Follow(ctx, rec.ID, 0, func(e store.Event) error {
		ev, err := event.Unmarshal(e.Data)
		if err != nil {
			return err
		}
		evs = append(evs, ev)
		if ev.Type == event.TextMessageContent && !cancelled {
			cancelled = true
			_, err = r.Cancel(ctx, rec.ID)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if e := last(evs); !e.Cancelled() {
		t.Fatalf("got %s", dump(evs))
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := h.Wait(wctx, rec.ID); err != nil {
		t.Fatalf("the client should end with the cancelled agent: %v", err)
	}
	if !strings.Contains(dump(evs), "Working on: p") {
		t.Errorf("events: %s", dump(evs))
	}
}
