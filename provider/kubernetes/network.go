package kubernetes

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/d10ffeed/corral/sandbox"
)

// A sandbox created with sandbox.NetworkDeny is cut off in one or both of
// two ways (Options.DenyEnforcement):
//
//   - a NetworkPolicy named after the sandbox that selects its Pod (by
//     LabelSandboxID) with both policy types and no rules: no ingress, no
//     egress. It is made right after the Pod, owned by it (the garbage
//     collector removes it with the Pod) and deleted by Destroy. Whether
//     it is enforced is the network plugin's business: the bridge CNI of
//     corral's test cluster does not enforce NetworkPolicies at all.
//   - an init container (the sandbox's image, only NET_ADMIN) that takes
//     every interface but loopback down and flushes its addresses before
//     the sandbox container starts (denyScript). The Pod's containers share
//     one network namespace, so the sandbox container starts without a
//     route anywhere, and it has no NET_ADMIN to bring one back. Exec,
//     files and port-forward still work: they go through the kubelet and
//     the container runtime, not the Pod's network. This needs a Pod
//     Security level that allows NET_ADMIN (privileged).
//
// Only the init container is a guarantee, so Capabilities.NetworkPolicy
// is true when it is part of the enforcement.

// networkPolicyName is the name of a sandbox's deny policy.
func networkPolicyName(id string) string { return id + "-deny" }

// ownerPod is an owner reference to a sandbox's Pod, so the garbage
// collector deletes what corral made for it with it.
func ownerPod(pod *corev1.Pod) []metav1.OwnerReference {
	return []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID}}
}

// denyPolicy is the NetworkPolicy that denies a sandbox's Pod all ingress
// and egress.
func (p *Provider) denyPolicy(id string, pod *corev1.Pod) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{
		TypeMeta: metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: networkPolicyName(id), Namespace: p.ns,
			Labels:          map[string]string{LabelManaged: "true", LabelSandboxID: id},
			Annotations:     p.annotations(nil),
			OwnerReferences: ownerPod(pod)},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{LabelSandboxID: id}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
		},
	}
}

// ensureDenyPolicy makes the sandbox's deny policy when the enforcement
// includes one (an existing one, from an earlier Pod of the sandbox, is
// replaced so that its owner is the Pod that runs now; one the Pod owns
// is kept).
func (p *Provider) ensureDenyPolicy(ctx context.Context, op, id string, pod *corev1.Pod) error {
	if !p.opts.DenyEnforcement.byPolicy() {
		return nil
	}
	np := p.denyPolicy(id, pod)
	err := p.core.createNetworkPolicy(ctx, np)
	if apierrors.IsAlreadyExists(err) {
		old, gerr := p.core.getNetworkPolicy(ctx, p.ns, np.Name)
		if gerr == nil && len(old.OwnerReferences) > 0 && old.OwnerReferences[0].UID == pod.UID {
			return nil // this Pod's already
		}
		if err = p.deleteNetworkPolicies(ctx, id); err == nil {
			err = p.core.createNetworkPolicy(ctx, np)
		}
	}
	if err != nil {
		return p.apiError(op, id, err)
	}
	return nil
}

// deleteNetworkPolicies deletes corral's NetworkPolicies of a sandbox.
func (p *Provider) deleteNetworkPolicies(ctx context.Context, id string) error {
	sel := labels.SelectorFromSet(labels.Set{LabelManaged: "true", LabelSandboxID: id}).String()
	err := p.core.deleteNetworkPolicies(ctx, p.ns, sel)
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// removeExtras deletes what corral made for a sandbox besides its Pod or
// claim: its NetworkPolicy and Services (owned by the Pod too, so the
// garbage collector would get them; this makes Destroy complete at once)
// and its workspace claim.
func (p *Provider) removeExtras(ctx context.Context, op, id string) error {
	if err := p.deleteNetworkPolicies(ctx, id); err != nil {
		return p.apiError(op, id, err)
	}
	if err := p.deleteServices(ctx, id); err != nil {
		return p.apiError(op, id, err)
	}
	if p.opts.Workspace == WorkspacePVC {
		return p.removeWorkspace(ctx, op, id)
	}
	return nil
}

// denied reports whether a Pod was made with its network denied.
func denied(pod *corev1.Pod) bool { return pod.Labels[LabelNetwork] == string(sandbox.NetworkDeny) }
