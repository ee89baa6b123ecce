package docker

import (
	"context"
	"errors"
	"net/netip"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/d10ffeed/corral/sandbox"
)

// EgressNetwork is the Docker network of sandboxes with an egress
// allow-list: internal (no route out of the host), so their only way out
// is corral's egress gateway, which listens on the network's gateway
// address on the host (EgressGateway).
const EgressNetwork = "corral-egress"

// EnforcesEgress reports that Docker enforces an egress allow-list
// (sandbox.EgressEnforcer): such sandboxes join EgressNetwork.
func (p *Provider) EnforcesEgress() bool { return true }

// EgressGateway makes EgressNetwork when it is missing and returns the
// host's address on it, where the egress gateway must listen.
func (p *Provider) EgressGateway(ctx context.Context) (string, error) {
	res, err := p.cli.NetworkInspect(ctx, EgressNetwork, client.NetworkInspectOptions{})
	if cerrdefs.IsNotFound(err) {
		_, err = p.cli.NetworkCreate(ctx, EgressNetwork, client.NetworkCreateOptions{Driver: "bridge", Internal: true,
			Labels: map[string]string{LabelManaged: "true"}})
		if err != nil && !cerrdefs.IsConflict(err) {
			return "", sandbox.Wrap(sandbox.Unavailable, "docker.egress", EgressNetwork, err)
		}
		res, err = p.cli.NetworkInspect(ctx, EgressNetwork, client.NetworkInspectOptions{})
	}
	if err != nil {
		return "", sandbox.Wrap(sandbox.Unavailable, "docker.egress", EgressNetwork, err)
	}
	if !res.Network.Internal {
		return "", sandbox.Errorf(sandbox.FailedPrecondition, "docker.egress", EgressNetwork, "the network exists but is not internal; remove it (docker network rm %s)", EgressNetwork)
	}
	for _, c := range res.Network.IPAM.Config {
		if c.Gateway.Is4() {
			return c.Gateway.String(), nil
		}
	}
	return "", sandbox.Wrap(sandbox.Unavailable, "docker.egress", EgressNetwork, errors.New("the network has no IPv4 gateway"))
}

// EgressSandbox returns the sandbox key (LabelKey) of the corral container
// that has ip on EgressNetwork, so the egress gateway can name the run of
// a proxy request that came without credentials.
func (p *Provider) EgressSandbox(ctx context.Context, ip string) (string, bool) {
	addr, err := netip.ParseAddr(ip)
	if err != nil {
		return "", false
	}
	res, err := p.cli.NetworkInspect(ctx, EgressNetwork, client.NetworkInspectOptions{})
	if err != nil {
		return "", false
	}
	for id, ep := range res.Network.Containers {
		if ep.IPv4Address.Addr() != addr.Unmap() && ep.IPv6Address.Addr() != addr {
			continue
		}
		c, err := p.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
		if err != nil || c.Container.Config == nil || c.Container.Config.Labels[LabelManaged] != "true" {
			return "", false
		}
		key := c.Container.Config.Labels[LabelKey]
		return key, key != ""
	}
	return "", false
}
