package grokbuild

import (
	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/harness"
)

// UnenforcedRules reports the gates Grok's permission flags cannot hold:
// command rules become --deny/--allow Bash(...) and the default the
// permission mode, which Grok applies to every call, but the fileWrite
// and network gates reach only its Edit, Write and web tools, not what a
// shell command the policy lets run does.
func (Harness) UnenforcedRules(req harness.Request) []event.UnenforcedRule {
	return harness.Claims(req.Policy, func(r event.UnenforcedRule) string {
		return harness.ToolGateReason(req.Policy, r, "Edit and Write tools", "WebFetch and web search")
	})
}
