package sbx

import (
	"strings"

	"github.com/d10ffeed/corral/sandbox"
)

// NativeEgress reports whether sbx enforces an egress allow-list
// (sandbox.NativeEgress). sbx's filtering proxy takes the list's forms as
// they are (host, *.domain, host:port), but per-sandbox allow rules only
// add to the machine's default policy, and a per-sandbox deny of "**"
// would win over them (deny beats allow). So the list is the sandbox's
// only way out only when the machine's default denies everything, which
// corral cannot read back: it is claimed only when
// Options.EgressDefaultDenied says so, and refused otherwise.
func (p *Provider) NativeEgress(list []string) error {
	if !p.opts.EgressDefaultDenied {
		return sandbox.Errorf(sandbox.FailedPrecondition, Name+".egress", "",
			"sbx's per-sandbox allow rules add to the machine's default network policy and its deny rules win over allows, so corral cannot make a list the sandbox's only way out; if the machine's default is deny-all (`sbx policy set-default deny-all`, no broad global allows), set provider.sbx.egressDefaultDenied: true (--sbx-egress-default-denied), or use the docker provider, whose gateway enforces the list")
	}
	for _, e := range list {
		if err := checkResource(e); err != nil {
			return err
		}
	}
	return nil
}

// egressRule is the per-sandbox allow rule of an allow-list (nil for
// none).
func (p *Provider) egressRule(list []string) ([][2]string, error) {
	if len(list) == 0 {
		return nil, nil
	}
	if err := p.NativeEgress(list); err != nil {
		return nil, err
	}
	lower := make([]string, len(list))
	for i, e := range list {
		lower[i] = strings.ToLower(e)
	}
	return [][2]string{{"allow", strings.Join(lower, ",")}}, nil
}
