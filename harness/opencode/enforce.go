package opencode

import (
	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/harness"
)

// UnenforcedRules reports what OpenCode's permission rules cannot hold:
// command rules and the default become its bash permission, the gates its
// edit and web permissions, so a shell command the policy lets run can
// still write files or reach the network, and the default does not reach
// OpenCode's other tools (MCP servers' tools, task, skills), which keep
// OpenCode's own permissions.
func (Harness) UnenforcedRules(req harness.Request) []event.UnenforcedRule {
	return harness.Claims(req.Policy, func(r event.UnenforcedRule) string {
		if why := harness.ToolGateReason(req.Policy, r, "edit tools (edit, write, apply_patch)", "web tools (webfetch, websearch)"); why != "" {
			return why
		}
		if r.Rule == harness.RuleDefault {
			return "the default reaches OpenCode's bash, edit and web tools only; its other tools (MCP servers' tools, task, skills) keep OpenCode's own permissions"
		}
		return ""
	})
}
