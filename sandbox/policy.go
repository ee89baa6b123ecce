package sandbox

import (
	"net/netip"
	"regexp"
	"strconv"
	"strings"
)

// Decision is a policy's verdict on an action.
type Decision string

// Decisions. The zero value means "not set"; inside a policy it resolves
// to Ask.
const (
	Allow Decision = "allow"
	Ask   Decision = "ask"
	Deny  Decision = "deny"
)

// Valid reports whether d is empty or one of the three decisions.
func (d Decision) Valid() bool { return d == "" || d == Allow || d == Ask || d == Deny }

// Policy says what an agent may do. Command rules are anchored globs: '*'
// matches any run of characters except a newline, everything else matches
// itself, and a pattern must match the whole (trimmed) command. Script
// aliases match both ways: a rule naming a workspace script matches that
// script's command, and a command equal to a script's text matches rules
// naming the script. Precedence is deny > ask > allow > Default, and an
// unset Default is Ask.
//
// No policy (a nil *Policy) guards nothing: every action is allowed, as
// under Policy{Default: Allow} (EffectivePolicy), for every harness. A
// policy that is set, even an empty one, asks for whatever it has no rule
// for unless its Default says otherwise.
//
// FileWrite and Network are coarse gates; Network is handed to the provider
// at create (NetworkDeny where the provider enforces it).
type Policy struct {
	Commands  CommandRules `json:"commands,omitzero"`
	FileWrite Decision     `json:"fileWrite,omitempty"`
	Network   Decision     `json:"network,omitempty"`
	Default   Decision     `json:"default,omitempty"`
	// Egress, when set, is the egress allow-list (policy.network: {allow:
	// [...]}): the sandbox's only way out is corral's egress gateway,
	// which lets through CONNECT and plain HTTP to these hosts only
	// ("host", "host:port" or "*.domain"). A provider that cannot enforce
	// it refuses it (see EgressEnforcer).
	Egress []string `json:"egress,omitempty"`
}

// EgressEnforcer is a provider that can put a sandbox on a network whose
// only way out is the egress gateway (CreateOptions.Egress). Find it with
// ProviderAs; a provider without it refuses an egress allow-list.
type EgressEnforcer interface {
	// EnforcesEgress reports whether the provider enforces
	// CreateOptions.Egress.
	EnforcesEgress() bool
}

// NativeEgress is a provider whose backend enforces an egress allow-list
// by its own domain rules, with no gateway in the way (the agent gets no
// proxy, and attempts are not run events). Find it with ProviderAs.
type NativeEgress interface {
	// NativeEgress returns nil when the backend enforces list as it is,
	// or why not (FailedPrecondition, with a hint).
	NativeEgress(list []string) error
}

// EgressList returns the policy's egress allow-list (nil for none).
func (p *Policy) EgressList() []string {
	if p == nil {
		return nil
	}
	return p.Egress
}

// EgressAllows reports whether host (host[:port], lower case) matches an
// allow-list entry: "host" (any port), "host:port", or "*.domain" (any
// subdomain, any port).
func EgressAllows(list []string, host string) bool {
	name, port := host, ""
	if i := strings.LastIndexByte(host, ':'); i >= 0 && !strings.HasSuffix(host, "]") {
		name, port = host[:i], host[i+1:]
	}
	for _, e := range list {
		e = strings.ToLower(e)
		en, ep := e, ""
		if i := strings.LastIndexByte(e, ':'); i >= 0 && !strings.HasSuffix(e, "]") {
			en, ep = e[:i], e[i+1:]
		}
		if ep != "" && ep != port {
			continue
		}
		if en == name || strings.HasPrefix(en, "*.") && strings.HasSuffix(name, en[1:]) {
			return true
		}
	}
	return false
}

// CommandRules are the command patterns of a Policy.
type CommandRules struct {
	Allow []string `json:"allow,omitempty"`
	Ask   []string `json:"ask,omitempty"`
	Deny  []string `json:"deny,omitempty"`
}

// Validate checks the decisions.
func (p *Policy) Validate() error {
	if p == nil {
		return nil
	}
	for name, d := range map[string]Decision{"fileWrite": p.FileWrite, "network": p.Network, "default": p.Default} {
		if !d.Valid() {
			return Errorf(InvalidArgument, "policy", name, "decision %q is not allow, ask or deny", d)
		}
	}
	for _, e := range p.Egress {
		h := strings.TrimPrefix(strings.ToLower(e), "*.")
		if _, _, err := SplitBrokerHost(h); err != nil || strings.HasPrefix(e, "http") || strings.Contains(h, "*") {
			return Errorf(InvalidArgument, "policy", "network.allow", "%q: want host, host:port or *.domain", e)
		}
	}
	if len(p.Egress) > 0 && p.Network == Deny {
		return Errorf(InvalidArgument, "policy", "network", "an allow-list and deny contradict each other")
	}
	return nil
}

// EffectivePolicy returns p, or for no policy (nil) the policy a run
// without one gets: everything allowed.
func EffectivePolicy(p *Policy) *Policy {
	if p == nil {
		return &Policy{Default: Allow}
	}
	return p
}

func (p *Policy) def() Decision {
	switch {
	case p == nil:
		return Allow
	case p.Default == "":
		return Ask
	}
	return p.Default
}

// HasCommandRules reports whether any command rule is set.
func (p *Policy) HasCommandRules() bool {
	return p != nil && len(p.Commands.Allow)+len(p.Commands.Ask)+len(p.Commands.Deny) > 0
}

// EvaluateCommand returns the decision for a shell command. scripts are the
// workspace's named scripts, used as aliases.
func (p *Policy) EvaluateCommand(command string, scripts map[string]string) Decision {
	if !p.HasCommandRules() {
		return p.def()
	}
	forms := aliases(strings.TrimSpace(command), scripts)
	matches := func(patterns []string) bool {
		for _, pat := range patterns {
			for _, pf := range aliases(pat, scripts) {
				re := globRegexp(pf)
				for _, f := range forms {
					if re.MatchString(f) {
						return true
					}
				}
			}
		}
		return false
	}
	switch {
	case matches(p.Commands.Deny):
		return Deny
	case matches(p.Commands.Ask):
		return Ask
	case matches(p.Commands.Allow):
		return Allow
	}
	return p.def()
}

// Capability returns the decision for a coarse gate ("fileWrite" or
// "network").
func (p *Policy) Capability(name string) Decision {
	if p != nil {
		switch name {
		case "fileWrite":
			if p.FileWrite != "" {
				return p.FileWrite
			}
		case "network":
			if p.Network != "" {
				return p.Network
			}
		}
	}
	return p.def()
}

// NetworkMode is the gate handed to a provider at create: NetworkDeny when
// the policy denies network, the provider's default otherwise.
func (p *Policy) NetworkMode() NetworkMode {
	if p != nil && p.Network == Deny {
		return NetworkDeny
	}
	return NetworkDefault
}

// aliases expands s to itself, the script it names, and every script name
// whose command is s.
func aliases(s string, scripts map[string]string) []string {
	out := []string{s}
	if cmd, ok := scripts[s]; ok {
		out = append(out, strings.TrimSpace(cmd))
	}
	for name, cmd := range scripts {
		if strings.TrimSpace(cmd) == s {
			out = append(out, name)
		}
	}
	return out
}

func globRegexp(pattern string) *regexp.Regexp {
	parts := strings.Split(pattern, "*")
	for i, part := range parts {
		parts[i] = regexp.QuoteMeta(part)
	}
	return regexp.MustCompile(`\A` + strings.Join(parts, `[^\n]*`) + `\z`)
}

// ApprovalKind is what an approval is for.
type ApprovalKind string

// Approval kinds.
const (
	ApproveCommand   ApprovalKind = "command"
	ApproveFileWrite ApprovalKind = "fileWrite"
	ApproveNetwork   ApprovalKind = "network"
	ApproveTool      ApprovalKind = "tool"
)

// ApprovalID returns the stable id of an approval: the same request gets
// the same id in every run, so a decision given once is found again.
func ApprovalID(provider string, kind ApprovalKind, target string) string {
	return provider + ":" + string(kind) + ":" + target
}

// ApprovalRequest is an action an agent wants to take.
type ApprovalRequest struct {
	Provider string       // the provider's name, part of the id
	Kind     ApprovalKind // what is asked
	Target   string       // the command, path, host or tool name
}

// Resolution is the outcome of Policy.Resolve.
type Resolution struct {
	ID            string   // the approval id
	Decision      Decision // Allow or Deny (never Ask)
	NeedsApproval bool     // the policy asked and no decision was given yet
}

// Resolve decides a request. Allow and deny rules are final; on Ask the
// decisions map (approval id → allowed) is consulted, and a missing entry
// denies the action for now with NeedsApproval set, so the caller can ask a
// person and run again with the answer.
func (p *Policy) Resolve(req ApprovalRequest, scripts map[string]string, decisions map[string]bool) Resolution {
	id := ApprovalID(req.Provider, req.Kind, req.Target)
	var d Decision
	switch req.Kind {
	case ApproveCommand:
		d = p.EvaluateCommand(req.Target, scripts)
	case ApproveFileWrite, ApproveNetwork:
		d = p.Capability(string(req.Kind))
	default:
		d = p.def()
	}
	if d != Ask {
		return Resolution{ID: id, Decision: d}
	}
	if allowed, ok := decisions[id]; ok {
		if allowed {
			return Resolution{ID: id, Decision: Allow}
		}
		return Resolution{ID: id, Decision: Deny}
	}
	return Resolution{ID: id, Decision: Deny, NeedsApproval: true}
}

// EgressEntry is an allow-list entry taken apart, for providers that
// translate the list into their own rules.
type EgressEntry struct {
	// Host is the name in lower case ("*.domain" for a wildcard), or the
	// address without brackets.
	Host string
	// Port is the entry's port; 0 for any.
	Port int
	// IP is the address when Host is an IP address (zero otherwise).
	IP netip.Addr
}

// ParseEgressEntry takes an entry of a validated allow-list apart
// ("host", "host:port", "*.domain", "1.2.3.4", "[::1]:443").
func ParseEgressEntry(e string) EgressEntry {
	host, port := strings.ToLower(strings.TrimSpace(e)), ""
	switch {
	case strings.HasPrefix(host, "["):
		if i := strings.IndexByte(host, ']'); i > 0 {
			host, port = host[1:i], strings.TrimPrefix(host[i+1:], ":")
		}
	case strings.Count(host, ":") == 1:
		host, port, _ = strings.Cut(host, ":")
	}
	n, _ := strconv.Atoi(port)
	ip, _ := netip.ParseAddr(host)
	return EgressEntry{Host: host, Port: n, IP: ip}
}
