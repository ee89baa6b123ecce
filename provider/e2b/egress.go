package e2b

import (
	"slices"
	"strings"

	"github.com/d10ffeed/corral/sandbox"
)

// allTraffic is E2B's ALL_TRAFFIC: the deny-list entry that makes allowOut
// the only way out.
const allTraffic = "0.0.0.0/0"

// NativeEgress reports that E2B enforces an egress allow-list by its own
// rules (sandbox.NativeEgress): network.allowOut takes domain names and
// *.wildcards when denyOut is ALL_TRAFFIC, matched on port 80 (the Host
// header) and 443 (TLS SNI) only, so an entry with another port is
// refused.
func (p *Provider) NativeEgress(list []string) error {
	_, err := egressAllowOut(list)
	return err
}

// egressAllowOut translates an allow-list into allowOut entries.
func egressAllowOut(list []string) ([]string, error) {
	var out []string
	for _, e := range list {
		host := strings.ToLower(e)
		if i := strings.LastIndexByte(host, ':'); i >= 0 && !strings.HasSuffix(host, "]") {
			if port := host[i+1:]; port != "80" && port != "443" {
				return nil, sandbox.Errorf(sandbox.FailedPrecondition, Name+".egress", e,
					"E2B filters names on ports 80 and 443 only; list the host without the port, or use the docker provider, whose gateway enforces ports")
			}
			host = host[:i]
		}
		if !slices.Contains(out, host) {
			out = append(out, host)
		}
	}
	return out, nil
}
