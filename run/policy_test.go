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

// TestPolicyNoticeAtStartAndOnTakeOver: a run whose harness cannot enforce
// its policy (the command harness sees none of a program's actions) opens
// with a policy.unenforced event right after RUN_STARTED, its record says
// the same, and a takeover (which replays Begin against the stored log)
// neither diverges nor repeats the notice. Without a policy there is none.
func TestPolicyNoticeAtStartAndOnTakeOver(t *testing.T) {
	e := newEnv(t)
	e.def.Policy = &sandbox.Policy{Commands: sandbox.CommandRules{Deny: []string{"rm *"}}, Default: sandbox.Allow}
	a := e.runner(t, run.Options{})
	b := e.runner(t, run.Options{})
	c := ctx(t)
	rec, err := a.Start(c, run.StartRequest{Definition: "d", Thread: "t", Harness: command.Name,
		Args: []string{"sh", "-c", "for i in $(seq 1 40); do echo $i; sleep 0.01; done"}})
	if err != nil {
		t.Fatal(err)
	}
	var rules []event.UnenforcedRule
	if err := json.Unmarshal([]byte(rec.PolicyUnenforced), &rules); err != nil || len(rules) != 1 ||
		rules[0].Rule != "commands.deny" || rules[0].Pattern != "rm *" || !strings.Contains(rules[0].Reason, "sees none") {
		t.Fatalf("the record's PolicyUnenforced = %q (%v)", rec.PolicyUnenforced, err)
	}
	// Detach once the notice and some output are stored; take over from b.
	fctx, stop := context.WithCancel(c)
	var seen int64
	_ = a.Follow(fctx, rec.ID, 0, func(ev store.Event) error {
		seen = ev.Seq
		if ev.Seq >= 10 {
			stop()
		}
		return nil
	})
	if err := a.Detach(c, rec.ID); err != nil {
		t.Fatal(err)
	}
	rest := collect(t, b, c, rec.ID, seen, true)
	if len(rest) == 0 || rest[len(rest)-1].Type != event.RunFinished {
		t.Fatalf("the takeover should finish the run: %d events after %d", len(rest), seen)
	}
	all := collect(t, b, c, rec.ID, 0, false)
	notices := 0
	for i, ev := range all {
		if ev.Type == event.Custom && ev.Name == event.PolicyUnenforced {
			notices++
			var n event.PolicyNotice
			if i != 1 || json.Unmarshal(ev.Value, &n) != nil || n.Harness != command.Name || len(n.Rules) != 1 {
				t.Errorf("event %d: %s", i, ev.Value)
			}
		}
	}
	if all[0].Type != event.RunStarted || notices != 1 {
		t.Errorf("want RUN_STARTED then one policy.unenforced, got %d notices; first %s", notices, all[0].Type)
	}
	if got := lines(all); strings.Join(got, ",") != strings.Join(seq(40), ",") {
		t.Errorf("the log holds %v", got)
	}
	final, _, _ := e.st.GetRun(c, rec.ID)
	if final.PolicyUnenforced != rec.PolicyUnenforced || final.Status != store.RunCompleted {
		t.Errorf("final record: status %s, notice %q", final.Status, final.PolicyUnenforced)
	}
	t.Logf("policy.unenforced events in the log after a takeover: %d", notices)

	// No policy: nothing to claim, no notice. (The drivers read the
	// definition until their post-run work ends: wait for them first.)
	_ = a.Wait(c, rec.ID)
	_ = b.Wait(c, rec.ID)
	e.def.Policy = nil
	c2 := e.runner(t, run.Options{})
	rec2, err := c2.Start(c, run.StartRequest{Definition: "d", Thread: "t2", Harness: command.Name, Args: []string{"true"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range collect(t, c2, c, rec2.ID, 0, false) {
		if ev.Name == event.PolicyUnenforced {
			t.Errorf("a run without a policy has a notice: %s", ev.Value)
		}
	}
	if rec2.PolicyUnenforced != "" {
		t.Errorf("PolicyUnenforced = %q", rec2.PolicyUnenforced)
	}
}
