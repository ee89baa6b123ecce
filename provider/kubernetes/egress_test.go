package kubernetes_test

import (
	"context"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/provider/kubernetes"
	"github.com/d10ffeed/corral/provider/kubernetes/k8stest"
	"github.com/d10ffeed/corral/sandbox"
)

// TestEgressNetworkPolicy: on the test cluster, a sandbox with an IP
// allow-list (EgressPolicy networkpolicy) gets an egress NetworkPolicy
// that selects its Pod with the list's ipBlocks, and Destroy deletes it.
// (The cluster's bridge CNI does not enforce it; that is why the provider
// claims it only when told to trust the network plugin.)
func TestEgressNetworkPolicy(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	p := newProvider(t, kubernetes.Options{EgressPolicy: kubernetes.EgressNetworkPolicy})
	h := testutil.Create(t, p, sandbox.CreateOptions{Egress: []string{"203.0.113.7:443", "198.51.100.2"}})
	pod := livePod(t, ctx, p, h)
	nps := k8stest.Client(t).NetworkingV1().NetworkPolicies(p.Namespace())
	np, err := nps.Get(ctx, h.ID()+"-egress", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the egress NetworkPolicy: %v", err)
	}
	if np.Spec.PodSelector.MatchLabels[kubernetes.LabelSandboxID] != pod.Labels[kubernetes.LabelSandboxID] ||
		len(np.Spec.PolicyTypes) != 1 || np.Spec.PolicyTypes[0] != "Egress" || len(np.Spec.Egress) != 2 ||
		np.Spec.Egress[0].To[0].IPBlock.CIDR != "203.0.113.7/32" || np.Spec.Egress[0].Ports[0].Port.IntValue() != 443 ||
		np.Spec.Egress[1].To[0].IPBlock.CIDR != "198.51.100.2/32" || len(np.Spec.Egress[1].Ports) != 0 {
		t.Errorf("the egress NetworkPolicy %+v does not allow-list the pod %s (labels %v)", np.Spec, pod.Name, pod.Labels)
	}
	if _, err := p.Create(ctx, sandbox.CreateOptions{Egress: []string{"api.anthropic.com"}}); sandbox.CodeOf(err) != sandbox.FailedPrecondition {
		t.Errorf("a host name in the list: %v", err)
	}
	if err := h.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := nps.Get(ctx, np.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the egress NetworkPolicy after Destroy: %v, want NotFound", err)
	}
}
