package daytonafake

import (
	"fmt"
	"net/netip"
	"strings"
)

// maxCIDRs is how many CIDR blocks networkAllowList takes (Daytona's
// network limits documentation).
const maxCIDRs = 5

// Network is a sandbox's outbound network settings as a create set them.
type Network struct {
	BlockAll         bool
	NetworkAllowList string // comma-separated IPv4 CIDRs
	DomainAllowList  string // comma-separated names and *.wildcards
}

// checkNetwork validates a create's lists as Daytona documents them:
// networkAllowList up to 5 IPv4 CIDR blocks, domainAllowList names or
// "*."-wildcards (no scheme, port or path), both comma-separated.
func checkNetwork(cidrs, domains string) error {
	if cidrs != "" {
		list := strings.Split(cidrs, ",")
		if len(list) > maxCIDRs {
			return fmt.Errorf("networkAllowList: at most %d CIDR blocks, got %d", maxCIDRs, len(list))
		}
		for _, c := range list {
			pf, err := netip.ParsePrefix(strings.TrimSpace(c))
			if err != nil || !pf.Addr().Is4() {
				return fmt.Errorf("networkAllowList: %q is not an IPv4 CIDR block", c)
			}
		}
	}
	if domains != "" {
		for _, d := range strings.Split(domains, ",") {
			name := strings.TrimPrefix(strings.TrimSpace(d), "*.")
			if name == "" || strings.ContainsAny(name, ":/?#@ *") || !strings.Contains(name, ".") && name != "localhost" {
				return fmt.Errorf("domainAllowList: %q is not a domain or *.wildcard", d)
			}
		}
	}
	return nil
}

// SandboxNetwork returns the network settings a create sent for the
// sandbox with id (false when there is none).
func (s *Server) SandboxNetwork(id string) (Network, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.sandboxes[id]
	if !ok {
		return Network{}, false
	}
	return d.network, true
}
