package harness_test

import (
	"strings"
	"testing"

	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/harness/acp"
	"github.com/d10ffeed/corral/harness/claudecode"
	"github.com/d10ffeed/corral/harness/codex"
	"github.com/d10ffeed/corral/harness/command"
	"github.com/d10ffeed/corral/harness/grokbuild"
	"github.com/d10ffeed/corral/harness/opencode"
	"github.com/d10ffeed/corral/sandbox"
)

// ruleNames sums up rules as "rule[:pattern]" words.
func ruleNames(rules []event.UnenforcedRule) string {
	var out []string
	for _, r := range rules {
		s := r.Rule
		if r.Pattern != "" {
			s += ":" + r.Pattern
		}
		if r.Reason == "" || (r.Decision != "deny" && r.Decision != "ask") {
			s += "(bad)"
		}
		out = append(out, s)
	}
	return strings.Join(out, " ")
}

// TestUnenforcedRules pins, per harness, which rules of a policy it
// reports it cannot enforce: the ACP and command harnesses see only what
// the agent routes through corral (nothing, for a command), the others
// miss what their agent's shell does past the file and web tool gates, and
// codex cannot hold a default other than allow.
func TestUnenforcedRules(t *testing.T) {
	acpH := acp.New(acp.Options{})
	t.Cleanup(func() { _ = acpH.Close(t.Context()) })
	// Everything guarded, shell closed: commands that no rule allows ask.
	strict := &sandbox.Policy{Commands: sandbox.CommandRules{Deny: []string{"rm *"}, Ask: []string{"curl *"}},
		FileWrite: sandbox.Deny, Network: sandbox.Deny, Default: sandbox.Ask}
	// Commands allowed by default: a shell command can write and fetch.
	open := &sandbox.Policy{Commands: sandbox.CommandRules{Deny: []string{"rm *"}}, FileWrite: sandbox.Deny, Network: sandbox.Ask, Default: sandbox.Allow}
	awkward := &sandbox.Policy{Commands: sandbox.CommandRules{Deny: []string{"ls *.go", "git push"}}, Default: sandbox.Allow}
	allowAll := &sandbox.Policy{Default: sandbox.Allow}
	all := "commands.deny:rm * commands.ask:curl * fileWrite network default"
	cases := []struct {
		name string
		h    harness.Harness
		req  harness.Request
		cut  bool
		want string
	}{
		{"command/no policy", command.Harness{}, harness.Request{}, false, ""},
		{"command/allow all", command.Harness{}, harness.Request{Policy: allowAll}, false, ""},
		{"command/strict", command.Harness{}, harness.Request{Policy: strict}, false, all},
		{"command/strict, network cut", command.Harness{}, harness.Request{Policy: strict}, true, "commands.deny:rm * commands.ask:curl * fileWrite default"},
		{"acp/no policy", acpH, harness.Request{}, false, ""},
		{"acp/strict", acpH, harness.Request{Policy: strict}, false, all},
		{"acp/open", acpH, harness.Request{Policy: open}, false, "commands.deny:rm * fileWrite network"},
		{"claude-code/strict", claudecode.Harness{}, harness.Request{Policy: strict}, false, ""},
		{"claude-code/open", claudecode.Harness{}, harness.Request{Policy: open}, false, "fileWrite network"},
		{"claude-code/strict, best-effort", claudecode.Harness{}, harness.Request{Policy: strict, Options: map[string]string{claudecode.OptPolicy: "best-effort"}}, false, "default"},
		{"claude-code/strict, acceptEdits", claudecode.Harness{}, harness.Request{Policy: strict, Options: map[string]string{"permissionMode": "acceptEdits"}}, false, all},
		{"codex/strict", codex.Harness{}, harness.Request{Policy: strict}, false, "default"},
		{"codex/open", codex.Harness{}, harness.Request{Policy: open}, false, ""},
		{"codex/open, host auth", codex.Harness{}, harness.Request{Policy: open, Auth: harness.AuthHost}, false, "commands.deny:rm *"},
		{"codex/awkward patterns", codex.Harness{}, harness.Request{Policy: awkward}, false, "commands.deny:ls *.go"},
		{"codex/network, full access", codex.Harness{}, harness.Request{Policy: &sandbox.Policy{Network: sandbox.Deny, Default: sandbox.Allow},
			Options: map[string]string{codex.OptSandbox: codex.SandboxFullAccess}}, false, "network"},
		{"opencode/strict", opencode.Harness{}, harness.Request{Policy: strict}, false, "default"},
		{"opencode/open", opencode.Harness{}, harness.Request{Policy: open}, false, "fileWrite network"},
		{"grok/strict", grokbuild.Harness{}, harness.Request{Policy: strict}, false, ""},
		{"grok/open", grokbuild.Harness{}, harness.Request{Policy: open}, false, "fileWrite network"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := harness.UnenforcedRules(c.h, c.req, c.cut)
			if ruleNames(got) != c.want {
				t.Errorf("unenforced %q, want %q\n%+v", ruleNames(got), c.want, got)
			}
			if again := harness.UnenforcedRules(c.h, c.req, c.cut); ruleNames(again) != ruleNames(got) {
				t.Error("not deterministic")
			}
		})
	}
}
