package kubernetes

import (
	"context"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/d10ffeed/corral/provider/registry"
)

// Sandbox is one of corral's Pods as List reports it.
type Sandbox struct {
	// ID is the sandbox id (the Pod's name).
	ID string `json:"id"`
	// Key is the CreateOptions.ID it was created with, if any.
	Key string `json:"key,omitempty"`
	// Image is the container's image.
	Image string `json:"image"`
	// State is the Pod's phase ("Running", "Pending", ...), "Terminating"
	// while it is deleted, "Stopped" for a sandbox whose Pod is gone but
	// whose workspace claim is not (Options.Workspace pvc).
	State string `json:"state"`
	// Node is the node it runs on.
	Node string `json:"node,omitempty"`
	// CreatedAt is when the Pod was made.
	CreatedAt time.Time `json:"createdAt"`
	// Labels are the Pod's labels.
	Labels map[string]string `json:"labels,omitempty"`
}

// List returns corral's Pods in the namespace that carry every label in
// match (nil: all of corral's), newest first.
func (p *Provider) List(ctx context.Context, match map[string]string) ([]Sandbox, error) {
	set := labels.Set{LabelManaged: "true"}
	for k, v := range match {
		set[k] = v
	}
	if p.opts.Mode == ModeSandbox {
		out, err := p.listClaims(ctx, labels.SelectorFromSet(set).String())
		slices.SortFunc(out, func(a, b Sandbox) int { return b.CreatedAt.Compare(a.CreatedAt) })
		return out, err
	}
	list, err := p.core.listPods(ctx, p.ns, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(set).String()})
	if err != nil {
		return nil, p.apiError("kubernetes.list", p.ns, err)
	}
	out := make([]Sandbox, 0, len(list.Items))
	for _, pod := range list.Items {
		s := Sandbox{ID: pod.Name, Key: pod.Annotations[AnnotationKey], State: string(pod.Status.Phase),
			Node: pod.Spec.NodeName, CreatedAt: pod.CreationTimestamp.Time, Labels: pod.Labels}
		if pod.DeletionTimestamp != nil {
			s.State = "Terminating"
		}
		if len(pod.Spec.Containers) > 0 {
			s.Image = pod.Spec.Containers[0].Image
		}
		out = append(out, s)
	}
	if p.opts.Workspace == WorkspacePVC {
		more, err := p.listStopped(ctx, labels.SelectorFromSet(set).String(), out)
		if err != nil {
			return nil, err
		}
		out = append(out, more...)
	}
	slices.SortFunc(out, func(a, b Sandbox) int { return b.CreatedAt.Compare(a.CreatedAt) })
	return out, nil
}

// listStopped lists, with a pvc workspace, the sandboxes whose Pod is gone
// but whose workspace claim is not (State "Stopped": Resume makes a new
// Pod, Destroy and Prune delete the claim).
func (p *Provider) listStopped(ctx context.Context, sel string, running []Sandbox) ([]Sandbox, error) {
	list, err := p.core.listPVCs(ctx, p.ns, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, p.apiError("kubernetes.list", p.ns, err)
	}
	var out []Sandbox
	for _, c := range list.Items {
		id := c.Labels[LabelSandboxID]
		if id == "" || slices.ContainsFunc(running, func(s Sandbox) bool { return s.ID == id }) {
			continue
		}
		out = append(out, Sandbox{ID: id, Key: c.Annotations[AnnotationKey], Image: p.opts.Image, State: "Stopped",
			CreatedAt: c.CreationTimestamp.Time, Labels: c.Labels})
	}
	return out, nil
}

var (
	_ registry.Lister = (*Provider)(nil)
	_ registry.Pruner = (*Provider)(nil)
	_ registry.Pinger = (*Provider)(nil)
)

// ListSandboxes lists corral's Pods in the namespace (label
// corral.dev/managed=true), newest first, for corral sandbox ls.
func (p *Provider) ListSandboxes(ctx context.Context) ([]registry.Sandbox, error) {
	list, err := p.List(ctx, nil)
	if err != nil {
		return nil, err
	}
	out := make([]registry.Sandbox, len(list))
	for i, s := range list {
		out[i] = s.entry()
	}
	return out, nil
}

// entry is the sandbox as corral sandbox ls shows it.
func (s Sandbox) entry() registry.Sandbox {
	return registry.Sandbox{ID: s.ID, Key: s.Key, Image: s.Image, State: s.State, CreatedAt: s.CreatedAt, Detail: s}
}

// Prune deletes corral's Pods created more than o.OlderThan ago (running
// ones too unless o.KeepRunning). There are no snapshots to prune.
func (p *Provider) Prune(ctx context.Context, o registry.PruneOptions) (registry.PruneReport, error) {
	list, err := p.ListSandboxes(ctx)
	if err != nil {
		return registry.PruneReport{}, err
	}
	return registry.PruneSandboxes(ctx, list, o, func(s registry.Sandbox) bool { return s.State == string(corev1.PodRunning) }, p.Destroy)
}
