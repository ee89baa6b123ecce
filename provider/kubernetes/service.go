package kubernetes

import (
	"context"
	"fmt"
	"net"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/d10ffeed/corral/sandbox"
)

// With Options.Ports PortsService, ConnectPort makes a ClusterIP Service
// per sandbox port that selects the sandbox's Pod by LabelSandboxID (in
// Sandbox mode corral puts that label on the claim's Pod, see adoptPod).
// The Service carries corral's labels and annotations, is owned by the
// Pod (the garbage collector removes it with the Pod) and is deleted by
// Destroy. The endpoint is http://<cluster IP>:<port>: reachable from
// wherever the cluster's Service network is (other Pods; the nodes when
// kube-proxy or its replacement runs), not necessarily from the host
// corral runs on. LabelPort names the port on the Service.

// LabelPort is the sandbox port a Service of corral's reaches.
const LabelPort = "corral.dev/port"

// serviceName is the name of the Service of a sandbox's port: "<id>-<port>"
// when that is a valid Service name, else "corral-" and a digest.
func serviceName(id string, port int) string {
	n := id + "-" + strconv.Itoa(port)
	if len(validation.IsDNS1035Label(n)) == 0 {
		return n
	}
	return "corral-" + keyHash(n)[:16]
}

// servicePort is ConnectPort in Service mode.
func (p *Provider) servicePort(ctx context.Context, op string, h *handle, port int) (sandbox.Endpoint, error) {
	pod, err := p.core.getPod(ctx, p.ns, h.pod)
	if err != nil {
		return sandbox.Endpoint{}, p.apiError(op, h.id, err)
	}
	name := serviceName(h.id, port)
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: p.ns,
			Labels:          map[string]string{LabelManaged: "true", LabelSandboxID: h.id, LabelPort: strconv.Itoa(port)},
			Annotations:     p.annotations(nil),
			OwnerReferences: ownerPod(pod)},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: map[string]string{LabelSandboxID: h.id},
			Ports: []corev1.ServicePort{{Name: "p" + strconv.Itoa(port), Protocol: corev1.ProtocolTCP,
				Port: int32(port), TargetPort: intstr.FromInt32(int32(port))}},
		},
	}
	got, err := p.core.createService(ctx, svc)
	if apierrors.IsAlreadyExists(err) {
		got, err = p.core.getService(ctx, p.ns, name)
		if err == nil && (len(got.OwnerReferences) == 0 || got.OwnerReferences[0].UID != pod.UID) {
			// an earlier Pod's: make it this one's
			if err = p.core.deleteNamed(ctx, p.ns, "services", name); err == nil || apierrors.IsNotFound(err) {
				got, err = p.core.createService(ctx, svc)
			}
		}
	}
	if err != nil {
		return sandbox.Endpoint{}, p.apiError(op, h.id, err)
	}
	if got.Spec.ClusterIP == "" || got.Spec.ClusterIP == corev1.ClusterIPNone {
		return sandbox.Endpoint{}, sandbox.Errorf(sandbox.Internal, op, h.id, "service %s/%s has no cluster IP", p.ns, name)
	}
	url := "http://" + net.JoinHostPort(got.Spec.ClusterIP, strconv.Itoa(port))
	p.log.Debug("kubernetes: port service", "id", h.id, "port", port, "service", name, "url", url)
	return sandbox.Endpoint{URL: url}, nil
}

// deleteServices deletes corral's Services of a sandbox.
func (p *Provider) deleteServices(ctx context.Context, id string) error {
	sel := labels.SelectorFromSet(labels.Set{LabelManaged: "true", LabelSandboxID: id}).String()
	list, err := p.core.listServices(ctx, p.ns, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return err
	}
	for _, s := range list.Items {
		if err := p.core.deleteNamed(ctx, p.ns, "services", s.Name); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("service %s: %w", s.Name, err)
		}
	}
	return nil
}
