package codex

import (
	"strings"

	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/harness"
)

// UnenforcedRules reports what codex cannot hold of the policy (see the
// package documentation's policy mapping): the fileWrite gate is its
// read-only sandbox and the network gate its sandbox's network switch,
// both applied to every command codex runs; command deny and ask rules
// are execpolicy prefix rules, which some patterns cannot be written as
// and host auth cannot install; and no default but allow holds, since
// codex cannot confine commands to an allow-list.
func (Harness) UnenforcedRules(req harness.Request) []event.UnenforcedRule {
	p := req.Policy
	hostAuth := req.Auth == harness.AuthHost
	plan := planPolicy(p, req.Scripts, sandboxOption(req.Options))
	return harness.Claims(p, func(r event.UnenforcedRule) string {
		switch r.Rule {
		case harness.RuleCommandDeny, harness.RuleCommandAsk:
			if hostAuth {
				return "with host auth codex keeps its own CODEX_HOME, where corral cannot put the rules file"
			}
			forms := []string{r.Pattern}
			if cmd, ok := req.Scripts[strings.TrimSpace(r.Pattern)]; ok {
				forms = append(forms, cmd)
			}
			for _, f := range forms {
				if _, ok := commandPrefix(f); !ok {
					return "codex's rules match plain command words (optionally ending in \" *\"); " + quote(f) + " cannot be written as one"
				}
			}
		case harness.RuleNetwork:
			if plan.sandbox == SandboxFullAccess {
				return "the danger-full-access sandbox (option sandbox) does not cut the network"
			}
		case harness.RuleDefault:
			return "codex cannot confine commands to an allow-list: a command no rule names runs"
		}
		return ""
	})
}

// sandboxOption is the sandbox mode the options ask for where the policy
// lets the agent write.
func sandboxOption(opts map[string]string) string {
	if m := opts[OptSandbox]; m != "" {
		return m
	}
	return SandboxWorkspaceWrite
}

func quote(s string) string { return jsonString(s) }
