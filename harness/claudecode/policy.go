package claudecode

import (
	"encoding/json"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/d10ffeed/corral/sandbox"
)

// Permission modes of the Claude Code CLI this harness uses.
const (
	ModeBypass  = "bypassPermissions"
	ModeDefault = "default"
	ModeDontAsk = "dontAsk"
)

// approvalMarker starts the line of a permission-tool denial that names
// the approval a person must give; the translator turns it into an
// approval.requested event.
const approvalMarker = "corral-approval: "

// promptTool is the MCP tool Claude Code asks (--permission-prompt-tool).
const promptTool = "mcp__corral__approve"

var (
	fileWriteTools = []string{"Write", "Edit", "MultiEdit", "NotebookEdit"}
	networkTools   = []string{"WebFetch", "WebSearch"}
)

// permissions is how a policy maps onto the CLI's flags.
type permissions struct {
	mode       string
	promptTool bool           // serve the approve tool and pass --permission-prompt-tool
	settings   map[string]any // inline --settings (ask rules that route to the tool)
	allowed    []string       // --allowedTools
	disallowed []string       // --disallowedTools
}

// unrestricted reports whether p guards nothing: no policy, or every
// decision allow and no command rules.
func unrestricted(p *sandbox.Policy) bool {
	if p == nil {
		return true
	}
	return !p.HasCommandRules() && p.Default == sandbox.Allow &&
		p.Capability("fileWrite") == sandbox.Allow && p.Capability("network") == sandbox.Allow
}

// planPermissions maps the policy. withTool says whether the sandbox can
// run the permission-prompt tool (node is there).
//
//   - no policy, or one that allows everything: bypassPermissions;
//   - otherwise, with the tool: default mode, ask rules in --settings for
//     Bash and the file-write and network tools so that every such call
//     reaches the tool, which decides with the exact policy engine; deny
//     rules are also passed as --disallowedTools, which Claude Code
//     enforces on every part of a compound command;
//   - otherwise, without the tool: dontAsk (anything not pre-approved is
//     denied), allow rules as --allowedTools, deny rules as
//     --disallowedTools. Claude Code's own rule matching decides then, and
//     commands it deems read-only are allowed whatever the policy's
//     default: an approximation, never bypass.
func planPermissions(p *sandbox.Policy, withTool bool) permissions {
	if unrestricted(p) {
		return permissions{mode: ModeBypass}
	}
	var pm permissions
	pm.disallowed = append(pm.disallowed, bashRules(p.Commands.Deny)...)
	if p.Capability("fileWrite") == sandbox.Deny {
		pm.disallowed = append(pm.disallowed, fileWriteTools...)
	}
	if p.Capability("network") == sandbox.Deny {
		pm.disallowed = append(pm.disallowed, networkTools...)
	}
	if withTool {
		pm.mode = ModeDefault
		pm.promptTool = true
		ask := append([]string{"Bash"}, fileWriteTools...)
		ask = append(ask, networkTools...)
		pm.settings = map[string]any{"permissions": map[string]any{"ask": ask}}
		return pm
	}
	pm.mode = ModeDontAsk
	pm.allowed = append(pm.allowed, bashRules(p.Commands.Allow)...)
	if p.Capability("fileWrite") == sandbox.Allow {
		pm.allowed = append(pm.allowed, fileWriteTools...)
	}
	if p.Capability("network") == sandbox.Allow {
		pm.allowed = append(pm.allowed, networkTools...)
	}
	return pm
}

// bashRules turns command globs into Claude Code Bash(...) rules. Claude's
// rules use '*' as a wildcard too; a pattern with a parenthesis or a
// newline cannot be written as a rule and is left to the prompt tool.
func bashRules(patterns []string) []string {
	var out []string
	for _, p := range patterns {
		p = strings.TrimSpace(p)
		if p == "" || strings.ContainsAny(p, "()\n") {
			continue
		}
		out = append(out, "Bash("+p+")")
	}
	return out
}

// toolPolicy is the JSON the approve tool reads: the policy compiled to
// regular expressions with the same semantics as sandbox.Policy.
type toolPolicy struct {
	Provider        string            `json:"provider"`
	Marker          string            `json:"marker"`
	Default         sandbox.Decision  `json:"default"`
	FileWrite       sandbox.Decision  `json:"fileWrite"`
	Network         sandbox.Decision  `json:"network"`
	HasCommandRules bool              `json:"hasCommandRules"`
	Deny            []string          `json:"deny"`
	Ask             []string          `json:"ask"`
	Allow           []string          `json:"allow"`
	Scripts         map[string]string `json:"scripts"`
	// Decisions are the answers given for approval ids
	// (Request.Approvals): an ask whose id has one is allowed or denied
	// by it instead of raising an approval request.
	Decisions map[string]bool `json:"decisions"`

	// Live answers (all set, or Wait zero): how long an ask waits, in
	// milliseconds, and as the approval.waiting event says it; how often
	// it reads the answers file; the answers file, the file holding the
	// answer key (hex; the tool unlinks it once read) and the run's
	// journal, to which the tool appends its approval lines.
	Wait     int64  `json:"wait,omitempty"`
	WaitText string `json:"waitText,omitempty"`
	Poll     int64  `json:"poll,omitempty"`
	Answers  string `json:"answers,omitempty"`
	KeyFile  string `json:"keyFile,omitempty"`
	Journal  string `json:"journal,omitempty"`
}

// liveWait is how an ask waits for a live answer (zero: it does not).
type liveWait struct {
	wait, poll            time.Duration
	answers, key, journal string
}

// compilePolicy compiles p, with the approvals answered so far, for the
// approve tool.
func compilePolicy(p *sandbox.Policy, scripts map[string]string, decisions map[string]bool, lw liveWait) []byte {
	def := p.Capability("") // the default decision
	tp := toolPolicy{
		Provider: Name, Marker: approvalMarker, Default: def,
		FileWrite: p.Capability("fileWrite"), Network: p.Capability("network"),
		HasCommandRules: p.HasCommandRules(),
		Deny:            patternRegexps(p.Commands.Deny, scripts),
		Ask:             patternRegexps(p.Commands.Ask, scripts),
		Allow:           patternRegexps(p.Commands.Allow, scripts),
		Scripts:         scripts,
		Decisions:       decisions,
	}
	if lw.wait > 0 {
		tp.Wait, tp.WaitText, tp.Poll = lw.wait.Milliseconds(), lw.wait.String(), lw.poll.Milliseconds()
		tp.Answers, tp.KeyFile, tp.Journal = lw.answers, lw.key, lw.journal
	}
	if tp.Scripts == nil {
		tp.Scripts = map[string]string{}
	}
	if tp.Decisions == nil {
		tp.Decisions = map[string]bool{}
	}
	b, err := json.Marshal(tp)
	if err != nil {
		panic("claudecode: " + err.Error())
	}
	return b
}

// patternRegexps expands each pattern by its script aliases (as
// sandbox.Policy does) and turns each form into an anchored regular
// expression that JavaScript and Go read alike: '*' matches any run of
// characters but a newline.
func patternRegexps(patterns []string, scripts map[string]string) []string {
	out := []string{}
	for _, pat := range patterns {
		for _, form := range aliasForms(pat, scripts) {
			parts := strings.Split(form, "*")
			for i, part := range parts {
				parts[i] = regexp.QuoteMeta(part)
			}
			out = append(out, "^"+strings.Join(parts, `[^\n]*`)+"$")
		}
	}
	return out
}

// aliasForms mirrors sandbox's alias rule: the string, the script it names,
// and the names of scripts whose command it is.
func aliasForms(s string, scripts map[string]string) []string {
	out := []string{s}
	if cmd, ok := scripts[s]; ok {
		out = append(out, strings.TrimSpace(cmd))
	}
	names := make([]string, 0, len(scripts))
	for name := range scripts {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if strings.TrimSpace(scripts[name]) == s {
			out = append(out, name)
		}
	}
	return out
}
