package kubernetes

import (
	"context"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/d10ffeed/corral/sandbox"
)

// EgressPolicy is how the provider enforces an egress allow-list
// (sandbox.Policy.Egress).
type EgressPolicy string

// The egress enforcements.
const (
	// EgressRefuse (the default) refuses an allow-list: the only native
	// rule is a NetworkPolicy, which the cluster's network plugin may
	// ignore (plain bridge CNI does), and a run must not go open.
	EgressRefuse EgressPolicy = ""
	// EgressNetworkPolicy trusts the cluster's network plugin (Calico,
	// Cilium, ...) to enforce NetworkPolicies: an allow-list of IP
	// addresses (optionally with a port) becomes a NetworkPolicy whose
	// egress rules are those ipBlocks.
	EgressNetworkPolicy EgressPolicy = "networkpolicy"
)

// NativeEgress reports whether the provider enforces list with a
// NetworkPolicy (sandbox.NativeEgress): only with
// Options.EgressPolicy networkpolicy, in Pods mode, and for IP entries
// (a NetworkPolicy names IP blocks, never host names).
func (p *Provider) NativeEgress(list []string) error {
	_, err := p.egressRules(list)
	return err
}

// egressRules translates an allow-list into NetworkPolicy egress rules:
// one ipBlock (a /32 or /128) per entry, on TCP and its port when it has
// one, else on every port and protocol.
func (p *Provider) egressRules(list []string) ([]networkingv1.NetworkPolicyEgressRule, error) {
	op := Name + ".egress"
	if p.opts.EgressPolicy != EgressNetworkPolicy {
		return nil, sandbox.Errorf(sandbox.FailedPrecondition, op, "",
			"the kubernetes provider can enforce an egress allow-list only with a NetworkPolicy, and whether one is enforced is up to the cluster's network plugin (bridge CNI ignores them); set egressPolicy: networkpolicy (--k8s-egress networkpolicy) if yours enforces NetworkPolicies, or use the docker provider, whose gateway enforces the list")
	}
	if p.opts.Mode == ModeSandbox {
		return nil, sandbox.Errorf(sandbox.FailedPrecondition, op, "",
			"an egress allow-list needs Pods mode: in Sandbox mode the Pod may run before corral's label (and so the NetworkPolicy) selects it")
	}
	var rules []networkingv1.NetworkPolicyEgressRule
	for _, e := range list {
		en := sandbox.ParseEgressEntry(e)
		if !en.IP.IsValid() {
			return nil, sandbox.Errorf(sandbox.FailedPrecondition, op, e,
				"a Kubernetes NetworkPolicy names IP addresses, not host names; list the host's addresses, or use corral's gateway (the docker provider) or an FQDN-aware network plugin's own policies (Cilium toFQDNs, Calico domains) for names")
		}
		r := networkingv1.NetworkPolicyEgressRule{To: []networkingv1.NetworkPolicyPeer{{
			IPBlock: &networkingv1.IPBlock{CIDR: netip.PrefixFrom(en.IP, en.IP.BitLen()).String()}}}}
		if en.Port != 0 {
			tcp, port := corev1.ProtocolTCP, intstr.FromInt32(int32(en.Port))
			r.Ports = []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &port}}
		}
		rules = append(rules, r)
	}
	return rules, nil
}

// egressPolicyName is the name of a sandbox's egress policy.
func egressPolicyName(id string) string { return id + "-egress" }

// ensureEgressPolicy makes the NetworkPolicy of a sandbox with an egress
// allow-list, right after its Pod (nothing but corral runs in the Pod
// before Create returns). It selects the sandbox's Pods by LabelSandboxID
// and has no owner: it outlives a Pod re-made on the workspace claim, and
// Destroy deletes it (removeExtras). One left from an earlier sandbox of
// the same name is replaced.
func (p *Provider) ensureEgressPolicy(ctx context.Context, op, id string, list []string) error {
	rules, err := p.egressRules(list)
	if err != nil {
		return err
	}
	np := &networkingv1.NetworkPolicy{
		TypeMeta: metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: egressPolicyName(id), Namespace: p.ns,
			Labels:      map[string]string{LabelManaged: "true", LabelSandboxID: id},
			Annotations: p.annotations(nil)},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{LabelSandboxID: id}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			Egress:      rules,
		},
	}
	err = p.core.createNetworkPolicy(ctx, np)
	if apierrors.IsAlreadyExists(err) {
		if err = p.deleteNetworkPolicies(ctx, id); err == nil {
			err = p.core.createNetworkPolicy(ctx, np)
		}
	}
	if err != nil {
		return p.apiError(op, id, err)
	}
	return nil
}
