package run_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/harness/command"
	"github.com/d10ffeed/corral/run"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
)

// pulling is a provider whose Create reports preparation steps, as the
// Docker provider does while it pulls an image.
type pulling struct {
	sandbox.Provider
	steps int
}

func (p pulling) Create(ctx context.Context, o sandbox.CreateOptions) (sandbox.Handle, error) {
	for i := range p.steps {
		sandbox.ReportProgress(ctx, sandbox.ProgressStep{Phase: "pull", Subject: "img:1", Where: "registry.test",
			Part: "layer" + string(rune('a'+i)), Status: "Pull complete", Total: int64(100 * (i + 1))})
	}
	return p.Provider.Create(ctx, o)
}

// TestSandboxProgressEvents: the provider's preparation steps are run
// events (before the agent's output), and a takeover that replays the
// journal neither trips over them nor repeats them.
func TestSandboxProgressEvents(t *testing.T) {
	e := newEnv(t)
	e.def.Provider = pulling{Provider: e.def.Provider, steps: 3}
	a := e.runner(t, run.Options{})
	b := e.runner(t, run.Options{})
	c := ctx(t)
	rec, err := a.Start(c, run.StartRequest{Definition: "d", Thread: "t", Harness: command.Name,
		Args: []string{"sh", "-c", "for i in $(seq 1 40); do echo $i; sleep 0.01; done"}})
	if err != nil {
		t.Fatal(err)
	}
	seen := followThenDetach(t, a, c, rec.ID, 12)
	collect(t, b, c, rec.ID, seen, true) // the takeover replays from the start
	_ = b.Wait(c, rec.ID)
	all := collect(t, b, c, rec.ID, 0, false)
	var steps []sandbox.ProgressStep
	firstText := -1
	for i, ev := range all {
		if ev.Type == event.Custom && ev.Name == event.SandboxProgress {
			var s sandbox.ProgressStep
			if err := json.Unmarshal(ev.Value, &s); err != nil {
				t.Fatal(err)
			}
			if firstText >= 0 {
				t.Errorf("progress event %d after the agent's output began", i)
			}
			steps = append(steps, s)
		}
		if ev.Type == event.TextMessageContent && firstText < 0 {
			firstText = i
		}
	}
	final, _, _ := e.st.GetRun(c, rec.ID)
	t.Logf("progress events: %d of 3 reported; lines %d of 40; status %s, driver epoch %d", len(steps), len(lines(all)), final.Status, final.DriverEpoch)
	if len(steps) != 3 || steps[0].Part != "layera" || steps[2].Total != 300 {
		t.Errorf("steps = %+v", steps)
	}
	if got := lines(all); strings.Join(got, ",") != strings.Join(seq(40), ",") {
		t.Errorf("the log holds %v", got)
	}
	if final.Status != store.RunCompleted || final.DriverEpoch != 2 {
		t.Errorf("final record %+v", final)
	}
}
