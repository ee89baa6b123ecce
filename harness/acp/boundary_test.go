package acp_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/harness/acp"
	"github.com/d10ffeed/corral/run"
	"github.com/d10ffeed/corral/sandbox"
)

// TestPolicyAtTheBoundary: the ACP methods corral serves apply the policy
// even when the agent never asks permission — terminal/create the command
// rules, fs/write_text_file the fileWrite gate — and a run says at its
// start that the rest of what the agent does is beyond corral.
func TestPolicyAtTheBoundary(t *testing.T) {
	bin := agent(t)
	const readme = "# the project\n"
	args := []string{bin, "-no-permission", "-cmd", "rm README.md", "-write", "README.md"}
	turn := func(t *testing.T, p *sandbox.Policy) (result, sandbox.Handle) {
		t.Helper()
		hd := newSandbox(t)
		if err := hd.FS().WriteFile(testCtx(t), "README.md", []byte(readme)); err != nil {
			t.Fatal(err)
		}
		return runTurn(t, newHarness(t), hd, harness.Request{Prompt: "clean up", Args: args, Policy: p}), hd
	}
	kept := func(t *testing.T, hd sandbox.Handle) bool {
		t.Helper()
		got, ok := readWorkspace(t, hd, "README.md")
		return ok && got == readme
	}
	var refused, sent int

	t.Run("DenyOnTerminalAndWrite", func(t *testing.T) {
		res, hd := turn(t, &sandbox.Policy{Commands: sandbox.CommandRules{Deny: []string{"rm *"}}, FileWrite: sandbox.Deny, Default: sandbox.Allow})
		tcs := toolCalls(t, res.events)
		sent += 2
		if tc := tcs["call-1"]; tc != nil && tc.isError && strings.Contains(tc.result, "running rm README.md denied by the sandbox policy") {
			refused++
		} else {
			t.Errorf("terminal/create of rm README.md must be refused: %+v", tc)
		}
		if tc := tcs["call-2"]; tc != nil && tc.isError && strings.Contains(tc.result, "writing README.md denied by the sandbox policy") {
			refused++
		} else {
			t.Errorf("fs/write_text_file of README.md must be refused: %+v", tc)
		}
		if !kept(t, hd) {
			t.Error("README.md must still be there, unchanged")
		}
		if a := approvals(t, res.events); len(a) != 0 {
			t.Errorf("a deny asks nobody: %+v", a)
		}
	})

	t.Run("AskOnTerminal", func(t *testing.T) {
		res, hd := turn(t, &sandbox.Policy{Commands: sandbox.CommandRules{Ask: []string{"rm *"}}, FileWrite: sandbox.Deny, Default: sandbox.Allow})
		sent++
		if tc := toolCalls(t, res.events)["call-1"]; tc != nil && tc.isError && strings.Contains(tc.result, "needs approval (approval id acp:command:rm README.md)") {
			refused++
		} else {
			t.Errorf("an ask refuses the command for this run: %+v", tc)
		}
		want := []event.Approval{{ID: "acp:command:rm README.md", Kind: "command", Target: "rm README.md", Title: "Run rm README.md"}}
		if got := approvals(t, res.events); len(got) != 1 || got[0] != want[0] {
			t.Errorf("approvals %+v, want %+v", got, want)
		}
		if !kept(t, hd) {
			t.Error("README.md must still be there")
		}
	})

	t.Run("AllowedWhenApproved", func(t *testing.T) {
		hd := newSandbox(t)
		if err := hd.FS().WriteFile(testCtx(t), "README.md", []byte(readme)); err != nil {
			t.Fatal(err)
		}
		res := runTurn(t, newHarness(t), hd, harness.Request{Prompt: "clean up", Args: args,
			Policy:    &sandbox.Policy{Commands: sandbox.CommandRules{Ask: []string{"rm *"}}, FileWrite: sandbox.Deny, Default: sandbox.Allow},
			Approvals: map[string]bool{"acp:command:rm README.md": true}})
		if tc := toolCalls(t, res.events)["call-1"]; tc == nil || tc.isError {
			t.Errorf("the approved command runs: %+v", tc)
		}
		if _, ok := readWorkspace(t, hd, "README.md"); ok {
			t.Error("the approved rm removes README.md")
		}
	})

	t.Run("NoticeAtTheStart", func(t *testing.T) {
		policy := &sandbox.Policy{Commands: sandbox.CommandRules{Deny: []string{"rm *"}}, FileWrite: sandbox.Deny, Default: sandbox.Allow}
		r := newRunner(t, newHarness(t), policy)
		ctx := testCtx(t)
		rec, err := r.Start(ctx, run.StartRequest{Definition: "d", Thread: "th", Harness: acp.Name, Prompt: "p", Args: args})
		if err != nil {
			t.Fatal(err)
		}
		evs := follow(t, ctx, r, rec.ID)
		if len(evs) < 2 || evs[1].Type != event.Custom || evs[1].Name != event.PolicyUnenforced {
			t.Fatalf("the run opens with policy.unenforced: %s", dump(evs))
		}
		var n event.PolicyNotice
		if err := json.Unmarshal(evs[1].Value, &n); err != nil || n.Harness != acp.Name || len(n.Rules) != 2 ||
			n.Rules[0].Rule != "commands.deny" || n.Rules[0].Pattern != "rm *" || n.Rules[1].Rule != "fileWrite" ||
			!strings.Contains(n.Rules[0].Reason, "terminal/create") {
			t.Errorf("notice %s (%v)", evs[1].Value, err)
		}
		stored, _, _ := r.Store().GetRun(ctx, rec.ID)
		var rules []event.UnenforcedRule
		if json.Unmarshal([]byte(stored.PolicyUnenforced), &rules) != nil || len(rules) != 2 {
			t.Errorf("the run record says it too: %q", stored.PolicyUnenforced)
		}
	})
	t.Logf("requests refused at corral's boundary: %d of %d sent (rm README.md through terminal/create, README.md through fs/write_text_file)", refused, sent)
}
