package acp_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/harness/acp"
	"github.com/d10ffeed/corral/run"
	"github.com/d10ffeed/corral/store"
)

// TestCancelGrace: a cancel first sends session/cancel and kills only an
// agent that does not end its turn within Options.CancelGrace.
//
//   - cooperative: the agent ends its cancelled turn 1.5s after
//     session/cancel (a generous grace of a minute): it gets no SIGTERM,
//     its last words are in the log, and the relay exits with the client's
//     code (1, a cancelled turn), not the kill's 143.
//   - slow exit: the agent ends its turn at once but, once its stdin
//     closed, holds on until the test lets it go, which the test does only
//     after five times the grace (200ms) has passed: the turn ended within
//     the grace, so nothing is killed however long the exit takes.
//   - stubborn: the agent ignores session/cancel; after the grace (200ms)
//     the run is killed: SIGTERM reaches the agent, the run ends
//     cancelled, and none of its processes is left.
//
// The verdicts do not depend on timing: the grace is either far longer
// than the agent's delay or never met.
func TestCancelGrace(t *testing.T) {
	bin := agent(t)
	for _, c := range []struct {
		name      string
		grace     time.Duration
		args      []string
		wantTERM  bool
		wantWords bool
		gate      bool
	}{
		{"cooperative", time.Minute, []string{"-hang", "-cancel-delay", "1500ms"}, false, true, false},
		{"slow exit", 200 * time.Millisecond, []string{"-hang"}, false, true, true},
		{"stubborn", 200 * time.Millisecond, []string{"-hang", "-ignore-cancel"}, true, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := acp.New(acp.Options{StartTimeout: 30 * time.Second, ExitGrace: time.Minute, CancelGrace: c.grace})
			t.Cleanup(func() { _ = h.Close(testCtx(t)) })
			r := newRunner(t, h, nil)
			ctx := testCtx(t)
			dir := t.TempDir()
			signals, gate := filepath.Join(dir, "signals"), filepath.Join(dir, "gate")
			args := append(append([]string{bin}, c.args...), "-signals", signals)
			if c.gate {
				args = append(args, "-exit-gate", gate)
				go func() {
					for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
						if b, _ := os.ReadFile(signals); strings.Contains(string(b), "eof") {
							break
						}
					}
					time.Sleep(5 * c.grace)
					_ = os.WriteFile(gate, nil, 0o600)
				}()
			}
			mark := fmt.Sprintf("cancel-%d", time.Now().UnixNano())
			killMarked(t, mark)
			rec, err := r.Start(ctx, run.StartRequest{Definition: "d", Thread: "th", Harness: acp.Name, Prompt: "p",
				Args: args, Env: map[string]string{markEnv: mark}})
			if err != nil {
				t.Fatal(err)
			}
			var evs []event.Event
			cancelled := false
			if err := r.Follow(ctx, rec.ID, 0, func(e store.Event) error {
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
			}); err != nil {
				t.Fatal(err)
			}
			if err := h.Wait(ctx, rec.ID); err != nil {
				t.Fatal(err)
			}
			if err := r.Wait(ctx, rec.ID); err != nil {
				t.Fatal(err)
			}
			b, _ := os.ReadFile(signals)
			got := strings.Fields(string(b))
			term := strings.Contains(string(b), "TERM")
			words := strings.Contains(dump(evs), "Cancelled by the client.")
			end := last(evs)
			code := -1
			if end.ExitCode != nil {
				code = *end.ExitCode
			}
			final, _, _ := r.Store().GetRun(ctx, rec.ID)
			left := marked(t, mark)
			if len(got) == 0 || got[0] != "cancel" {
				t.Errorf("the agent must get session/cancel first: it noted %q", got)
			}
			if term != c.wantTERM || words != c.wantWords || !end.Cancelled() || final.Status != store.RunCancelled {
				t.Errorf("agent noted %q (SIGTERM %v, want %v), its last words logged %v (want %v), last event %s %s, status %s",
					got, term, c.wantTERM, words, c.wantWords, end.Type, end.Code, final.Status)
			}
			if !c.wantTERM && code != 1 {
				t.Errorf("the relay exited %d: the agent that stopped by itself was killed (want 1, the client's code for a cancelled turn)", code)
			}
			if len(left) != 0 {
				t.Errorf("processes left after the cancel: %d%s", len(left), describe(left))
			}
			t.Logf("%s (grace %s): the agent noted %q; last words logged %v; run %s, exit %d; processes left %d",
				c.name, c.grace, got, words, final.Status, code, len(left))
		})
	}
}
