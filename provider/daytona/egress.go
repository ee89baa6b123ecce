package daytona

import (
	"net/netip"
	"slices"
	"strings"

	"github.com/d10ffeed/corral/sandbox"
)

// maxCIDRs is how many CIDR blocks Daytona's networkAllowList takes.
const maxCIDRs = 5

// NativeEgress reports that Daytona enforces an egress allow-list by its
// own firewall (sandbox.NativeEgress): IPv4 entries become
// networkAllowList (CIDRs, at most 5), names and *. wildcards
// domainAllowList; together they are a default-deny list. Neither names
// ports, so an entry with one is refused, as is an IPv6 address.
func (p *Provider) NativeEgress(list []string) error {
	_, _, err := egressLists(list)
	return err
}

// egressLists translates an allow-list into networkAllowList and
// domainAllowList (comma-separated).
func egressLists(list []string) (cidrs, domains string, err error) {
	var c, d []string
	refuse := func(e, why string) (string, string, error) {
		return "", "", sandbox.Errorf(sandbox.FailedPrecondition, Name+".egress", e, "%s; or use the docker provider, whose gateway enforces the list as written", why)
	}
	for _, e := range list {
		en := sandbox.ParseEgressEntry(e)
		switch {
		case en.Port != 0:
			return refuse(e, "Daytona's allow lists name hosts and networks without ports; list the host without the port (it is then reachable on every port)")
		case en.IP.IsValid() && !en.IP.Is4():
			return refuse(e, "Daytona's networkAllowList takes IPv4 CIDR blocks only")
		case en.IP.IsValid():
			if cidr := netip.PrefixFrom(en.IP, 32).String(); !slices.Contains(c, cidr) {
				c = append(c, cidr)
			}
		case !slices.Contains(d, en.Host):
			d = append(d, en.Host)
		}
	}
	if len(c) > maxCIDRs {
		return refuse(strings.Join(c, ","), "Daytona's networkAllowList takes at most 5 CIDR blocks")
	}
	return strings.Join(c, ","), strings.Join(d, ","), nil
}
