package acp

import (
	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/harness"
)

// UnenforcedRules reports every rule of the policy that denies or asks:
// corral enforces the policy only on what the agent routes through the
// client — session/request_permission, terminal/create and
// fs/write_text_file — and an ACP agent runs its own tools (its shell, its
// file edits, its fetches) without asking whenever it likes.
func (*Harness) UnenforcedRules(req harness.Request) []event.UnenforcedRule {
	return harness.Claims(req.Policy, func(r event.UnenforcedRule) string {
		switch r.Rule {
		case harness.RuleCommandDeny, harness.RuleCommandAsk:
			return "enforced only on commands the agent runs through corral (terminal/create) or asks about (session/request_permission); a command the agent runs itself is not seen"
		case harness.RuleFileWrite:
			return "enforced only on writes through corral (fs/write_text_file) or asked about (session/request_permission); a file the agent writes itself is not seen"
		case harness.RuleNetwork:
			return "enforced only on fetches the agent asks about (session/request_permission); the agent's own network use is not seen"
		}
		return "enforced only on what the agent routes through corral (session/request_permission, terminal/create, fs/write_text_file); what it does itself is not seen"
	})
}
