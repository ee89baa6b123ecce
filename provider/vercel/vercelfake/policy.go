package vercelfake

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"
)

// apiPolicy is a networkPolicy as the API answers it: {mode: allow-all |
// deny-all}, or the custom form with the domain and CIDR lists
// (@vercel/sandbox's LegacyCustomNetworkPolicyValidator).
type apiPolicy struct {
	Mode           string   `json:"mode"`
	AllowedDomains []string `json:"allowedDomains,omitempty"`
	AllowedCIDRs   []string `json:"allowedCIDRs,omitempty"`
	DeniedCIDRs    []string `json:"deniedCIDRs,omitempty"`
}

// parsePolicy checks a request's networkPolicy the way the SDK's
// NetworkPolicyRequestValidator shapes it — {mode: allow-all|deny-all}, or
// {allow: [domain...] | {domain: []}, subnets: {allow, deny: [cidr...]}} —
// and returns it in the answer's form; nil for none. Domains are names
// or "*"-prefixed wildcards (no scheme, port or path); per-domain rules
// (transform, forwardURL, response) are not implemented by the fake and
// are refused.
func parsePolicy(raw json.RawMessage) (*apiPolicy, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("networkPolicy: want an object, got %s", raw)
	}
	if mode, ok := m["mode"]; ok {
		var s string
		_ = json.Unmarshal(mode, &s)
		if s != "allow-all" && s != "deny-all" {
			return nil, fmt.Errorf("networkPolicy.mode: want allow-all or deny-all, got %s", mode)
		}
		return &apiPolicy{Mode: s}, nil
	}
	p := &apiPolicy{Mode: "custom"}
	for k, v := range m {
		switch k {
		case "allow":
			domains, err := parseDomains(v)
			if err != nil {
				return nil, err
			}
			p.AllowedDomains = domains
		case "subnets":
			var sn struct {
				Allow []string `json:"allow"`
				Deny  []string `json:"deny"`
			}
			dec := json.NewDecoder(bytes.NewReader(v))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&sn); err != nil {
				return nil, fmt.Errorf("networkPolicy.subnets: %v", err)
			}
			for _, c := range append(append([]string{}, sn.Allow...), sn.Deny...) {
				if _, err := netip.ParsePrefix(c); err != nil {
					return nil, fmt.Errorf("networkPolicy.subnets: %q is not a CIDR", c)
				}
			}
			p.AllowedCIDRs, p.DeniedCIDRs = sn.Allow, sn.Deny
		default:
			return nil, fmt.Errorf("networkPolicy: unknown field %q", k)
		}
	}
	return p, nil
}

// parseDomains reads networkPolicy.allow: a list of domains, or a record
// of domain to (here: empty) rule lists.
func parseDomains(v json.RawMessage) ([]string, error) {
	var list []string
	if err := json.Unmarshal(v, &list); err != nil {
		var rec map[string][]json.RawMessage
		if err := json.Unmarshal(v, &rec); err != nil {
			return nil, fmt.Errorf("networkPolicy.allow: want a list of domains or a record of rules, got %s", v)
		}
		for d, rules := range rec {
			if len(rules) > 0 {
				return nil, fmt.Errorf("networkPolicy.allow[%q]: the fake does not implement per-domain rules", d)
			}
			list = append(list, d)
		}
	}
	for _, d := range list {
		name := strings.TrimPrefix(strings.TrimPrefix(d, "*"), ".")
		if d != "*" && (name == "" || strings.ContainsAny(name, ":/?#@ *")) {
			return nil, fmt.Errorf("networkPolicy.allow: %q is not a domain (a name, or a \"*\"-prefixed wildcard)", d)
		}
	}
	return list, nil
}

// NetworkPolicy returns the network policy of the sandbox name as the API
// answers it (JSON), and whether the sandbox exists.
func (s *Server) NetworkPolicy(name string) (json.RawMessage, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sb, ok := s.sandboxes[name]
	if !ok {
		return nil, false
	}
	if sb.policy == nil {
		return nil, true
	}
	b, _ := json.Marshal(sb.policy)
	return b, true
}
