package vercel

import (
	"net/netip"
	"slices"

	"github.com/d10ffeed/corral/sandbox"
)

// NetworkPolicy is the custom form of the API's networkPolicy (what
// @vercel/sandbox's toAPINetworkPolicy sends for {allow, subnets}): only
// the listed domains ("*." wildcards) and subnets are reachable, all
// other traffic is denied.
type NetworkPolicy struct {
	Allow   []string `json:"allow,omitempty"`
	Subnets *Subnets `json:"subnets,omitempty"`
}

// Subnets are a NetworkPolicy's CIDR rules.
type Subnets struct {
	Allow []string `json:"allow,omitempty"`
	Deny  []string `json:"deny,omitempty"`
}

// NativeEgress reports that Vercel enforces an egress allow-list by its
// own firewall (sandbox.NativeEgress): names and *. wildcards become
// networkPolicy.allow, IP addresses subnets.allow. The format names no
// ports, so an entry with a port is refused rather than widened to every
// port.
func (p *Provider) NativeEgress(list []string) error {
	_, err := egressPolicy(list)
	return err
}

// egressPolicy translates an allow-list into a custom networkPolicy.
func egressPolicy(list []string) (*NetworkPolicy, error) {
	np := &NetworkPolicy{}
	for _, e := range list {
		en := sandbox.ParseEgressEntry(e)
		if en.Port != 0 {
			return nil, sandbox.Errorf(sandbox.FailedPrecondition, Name+".egress", e,
				"Vercel's networkPolicy names domains and subnets without ports; list the host without the port (it is then reachable on every port), or use the docker provider, whose gateway enforces ports")
		}
		if en.IP.IsValid() {
			cidr := netip.PrefixFrom(en.IP, en.IP.BitLen()).String()
			if np.Subnets == nil {
				np.Subnets = &Subnets{}
			}
			if !slices.Contains(np.Subnets.Allow, cidr) {
				np.Subnets.Allow = append(np.Subnets.Allow, cidr)
			}
			continue
		}
		if !slices.Contains(np.Allow, en.Host) {
			np.Allow = append(np.Allow, en.Host)
		}
	}
	return np, nil
}
