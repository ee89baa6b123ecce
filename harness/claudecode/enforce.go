package claudecode

import (
	"fmt"
	"strings"

	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/harness"
)

// OptPolicy is the option that says what to do when the permission tool
// cannot run (no node in the sandbox): "strict" (the default) refuses,
// "best-effort" falls back to Claude Code's own rules.
const OptPolicy = "policy"

// policyMode reads option policy: whether it is best-effort.
func policyMode(v string) (bool, error) {
	switch v {
	case "", "strict":
		return false, nil
	case "best-effort":
		return true, nil
	}
	return false, fmt.Errorf("option policy=%q: want strict or best-effort", v)
}

// UnenforcedRules reports what the permission tool cannot hold: it decides
// every Bash, file-writing and web tool call (and MCP tool calls) with the
// policy's exact rules, but the fileWrite and network gates reach only
// those tools, not a shell command the policy lets run. With option
// policy=best-effort, a sandbox without node gets Claude Code's own rules
// instead, which run the commands Claude Code deems read-only whatever the
// default and cannot express patterns with parentheses or newlines. A
// forced permission mode that approves by itself (acceptEdits, auto, ...)
// (option permissionMode or the run's mode) keeps the tool from being
// asked for what it approves.
func (Harness) UnenforcedRules(req harness.Request) []event.UnenforcedRule {
	p := req.Policy
	if unrestricted(p) {
		return nil
	}
	bestEffort, _ := policyMode(strings.TrimSpace(req.Options[OptPolicy]))
	mode, _ := permissionMode(req)
	return harness.Claims(p, func(r event.UnenforcedRule) string {
		switch mode {
		case "", ModeDefault, ModeDontAsk, "plan":
		default:
			return "permission mode " + mode + " (option permissionMode) approves some calls without asking corral's permission tool"
		}
		if why := harness.ToolGateReason(p, r, "file-editing tools (Write, Edit, MultiEdit, NotebookEdit)", "web tools (WebFetch, WebSearch)"); why != "" {
			return why
		}
		if !bestEffort {
			return ""
		}
		switch r.Rule {
		case harness.RuleCommandDeny, harness.RuleCommandAsk:
			if strings.ContainsAny(r.Pattern, "()\n") {
				return "with policy=best-effort and no node in the sandbox, Claude Code's own rules stand in, and this pattern cannot be written as one"
			}
		case harness.RuleDefault:
			return "with policy=best-effort and no node in the sandbox, Claude Code's own rules stand in, and they let commands Claude Code deems read-only run whatever the default"
		}
		return ""
	})
}
