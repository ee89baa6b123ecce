package harness

import (
	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/sandbox"
)

// PolicyReporter is implemented by harnesses that know which rules of a
// policy they can enforce. The runner asks before the run starts and keeps
// the answer on the run record; a run whose policy holds rules its harness
// cannot enforce starts with a policy.unenforced event saying which and
// why, so corral never claims a guard it does not have.
type PolicyReporter interface {
	// UnenforcedRules returns the rules of req.Policy (never nil here) that
	// this harness cannot enforce, or cannot fully, for a run of req. Only
	// req's Policy, Scripts, Args, Auth and Options are set: the answer
	// depends on nothing else (no sandbox exists yet), so it is the same
	// wherever and whenever it is computed.
	UnenforcedRules(req Request) []event.UnenforcedRule
}

// Rule names of event.UnenforcedRule.
const (
	RuleCommandDeny = "commands.deny"
	RuleCommandAsk  = "commands.ask"
	RuleFileWrite   = "fileWrite"
	RuleNetwork     = "network"
	RuleDefault     = "default"
)

// UnenforcedRules returns what h cannot enforce of req.Policy: nothing
// without a policy (which allows everything), h's own answer when it is a
// PolicyReporter, and every rule that denies or asks when it is not.
// networkCut says the sandbox's provider cuts the network itself (the
// policy denies network and the provider enforces that at create): a
// network deny is then enforced whatever the harness does.
func UnenforcedRules(h Harness, req Request, networkCut bool) []event.UnenforcedRule {
	if req.Policy == nil {
		return nil
	}
	var rules []event.UnenforcedRule
	if r, ok := h.(PolicyReporter); ok {
		rules = r.UnenforcedRules(req)
	} else {
		rules = Claims(req.Policy, func(event.UnenforcedRule) string {
			return "the " + h.Name() + " harness does not say what it enforces"
		})
	}
	out := rules[:0:0]
	for _, r := range rules {
		if networkCut && r.Rule == RuleNetwork && r.Decision == string(sandbox.Deny) {
			continue
		}
		out = append(out, r)
	}
	return out
}

// Claims lists the rules of p that deny or ask — what a harness has to
// enforce — in a fixed order: command deny patterns, command ask patterns,
// the fileWrite gate, the network gate, the default (each gate with its
// effective decision, the default's when it has none), each with the
// reason why(rule) gives; a rule for which why returns "" is left out.
func Claims(p *sandbox.Policy, why func(event.UnenforcedRule) string) []event.UnenforcedRule {
	if p == nil {
		return nil
	}
	var all []event.UnenforcedRule
	for _, pat := range p.Commands.Deny {
		all = append(all, event.UnenforcedRule{Rule: RuleCommandDeny, Pattern: pat, Decision: string(sandbox.Deny)})
	}
	for _, pat := range p.Commands.Ask {
		all = append(all, event.UnenforcedRule{Rule: RuleCommandAsk, Pattern: pat, Decision: string(sandbox.Ask)})
	}
	for _, g := range []struct{ rule, capability string }{{RuleFileWrite, "fileWrite"}, {RuleNetwork, "network"}, {RuleDefault, ""}} {
		if d := p.Capability(g.capability); d == sandbox.Deny || d == sandbox.Ask {
			all = append(all, event.UnenforcedRule{Rule: g.rule, Decision: string(d)})
		}
	}
	var out []event.UnenforcedRule
	for _, r := range all {
		if r.Reason = why(r); r.Reason != "" {
			out = append(out, r)
		}
	}
	return out
}

// ShellOpen reports whether p lets some shell commands run without asking
// (a default of allow, or allow rules): such a command can write files or
// reach the network whatever the fileWrite and network gates say, unless
// something below the agent (an OS sandbox, the provider) stops it.
func ShellOpen(p *sandbox.Policy) bool {
	return p.Capability("") == sandbox.Allow || len(p.Commands.Allow) > 0
}

// ToolGateReason is the reason for the fileWrite and network rules of a
// harness that gates its agent's own file-editing and web tools but not
// what a shell command does (tools names them, e.g. "Write and Edit"), or
// "" for other rules and when p lets no shell command run unasked.
func ToolGateReason(p *sandbox.Policy, r event.UnenforcedRule, writeTools, webTools string) string {
	if !ShellOpen(p) {
		return ""
	}
	switch r.Rule {
	case RuleFileWrite:
		return "only the agent's " + writeTools + " are gated; a shell command the policy lets run can write files all the same"
	case RuleNetwork:
		return "only the agent's " + webTools + " are gated; a shell command the policy lets run can reach the network (unless the sandbox's provider cuts it)"
	}
	return ""
}
