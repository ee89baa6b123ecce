package kubernetes

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/d10ffeed/corral/sandbox"
)

// Sandbox mode (Options.Mode ModeSandbox) makes sandboxes through
// agent-sandbox (sigs.k8s.io/agent-sandbox, v0.1.0's v1alpha1 API): corral
// keeps one SandboxTemplate per pod shape (named after a digest of it) and
// each sandbox is a SandboxClaim of that template; the claim's controller
// serves it from a warm pod of a SandboxWarmPool of the template when one
// has a pod ready, or makes a Sandbox, whose controller makes its Pod.
// Commands, files and ports then go to that Pod as in Pods mode. The
// sandbox id is the claim's name; deleting the claim (foreground) deletes
// its Sandbox and Pod through their owner references.
//
// The objects are read and written as JSON through the REST client (the
// few fields corral uses are declared below), so corral links neither the
// agent-sandbox module nor controller-runtime.

// Mode is how the provider makes sandboxes.
type Mode string

// The modes.
const (
	// ModePods makes a plain Pod per sandbox (any cluster).
	ModePods Mode = "pods"
	// ModeSandbox makes a SandboxClaim per sandbox (agent-sandbox's CRDs
	// and controller with --extensions installed).
	ModeSandbox Mode = "sandbox"
)

// agent-sandbox's API groups, version and the pod-name annotation its
// Sandbox controller keeps for an adopted warm pod.
const (
	asGroup          = "agents.x-k8s.io"
	asExtGroup       = "extensions.agents.x-k8s.io"
	asVersion        = "v1alpha1"
	asPodNameAnnot   = "agents.x-k8s.io/pod-name"
	asReadyCondition = "Ready"
)

type asPodTemplate struct {
	Metadata struct {
		Labels      map[string]string `json:"labels,omitempty"`
		Annotations map[string]string `json:"annotations,omitempty"`
	} `json:"metadata"`
	Spec corev1.PodSpec `json:"spec"`
}

type asTemplate struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
	Spec       struct {
		PodTemplate asPodTemplate `json:"podTemplate"`
	} `json:"spec"`
}

type asRef struct {
	Name string `json:"name"`
}

type asClaim struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
	Spec       struct {
		TemplateRef asRef `json:"sandboxTemplateRef"`
	} `json:"spec"`
	Status struct {
		Conditions []metav1.Condition `json:"conditions,omitempty"`
		Sandbox    struct {
			Name string `json:"Name,omitempty"`
		} `json:"sandbox,omitempty"`
	} `json:"status,omitempty"`
}

type asClaimList struct {
	Items []asClaim `json:"items"`
}

type asSandbox struct {
	Metadata metav1.ObjectMeta `json:"metadata"`
}

type asWarmPool struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
	Spec       struct {
		Replicas    int32 `json:"replicas"`
		TemplateRef asRef `json:"sandboxTemplateRef"`
	} `json:"spec"`
}

// crGet reads one object of agent-sandbox's.
func (c *coreClient) crGet(ctx context.Context, group, ns, resource, name string, into any) error {
	raw, err := c.rc.Get().AbsPath("/apis", group, asVersion, "namespaces", ns, resource, name).DoRaw(ctx)
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, into)
}

// crCreate creates one object of agent-sandbox's.
func (c *coreClient) crCreate(ctx context.Context, group, ns, resource string, obj any) error {
	body, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	_, err = c.rc.Post().AbsPath("/apis", group, asVersion, "namespaces", ns, resource).
		SetHeader("Content-Type", "application/json").Body(body).DoRaw(ctx)
	return err
}

// crList lists objects of agent-sandbox's by label selector.
func (c *coreClient) crList(ctx context.Context, group, ns, resource, selector string, into any) error {
	raw, err := c.rc.Get().AbsPath("/apis", group, asVersion, "namespaces", ns, resource).
		Param("labelSelector", selector).DoRaw(ctx)
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, into)
}

// crDelete deletes one object of agent-sandbox's.
func (c *coreClient) crDelete(ctx context.Context, group, ns, resource, name string, opts metav1.DeleteOptions) error {
	return c.rc.Delete().AbsPath("/apis", group, asVersion, "namespaces", ns, resource, name).Body(&opts).Do(ctx).Error()
}

// templates remembers the SandboxTemplate (and warm pool) the provider
// made sure of.
type templates struct {
	mu    sync.Mutex
	names map[bool]string // by network denied
}

// templateName is the name of corral's SandboxTemplate for the pod shape
// (with the network denied or not): Options.Template when set, else
// "corral-" and a digest of the shape (labels, annotations and pod spec),
// so providers (and daemons) with the same options share it.
func (p *Provider) templateName(deny bool) (string, asPodTemplate, error) {
	var pt asPodTemplate
	lbl, err := p.userLabels(nil)
	if err != nil {
		return "", pt, err
	}
	if deny {
		lbl[LabelNetwork] = string(sandbox.NetworkDeny)
	}
	pt.Metadata.Labels = lbl
	if len(p.opts.Annotations) > 0 {
		pt.Metadata.Annotations = p.annotations(nil)
	}
	pt.Spec = p.sandboxPodSpec(deny)
	if p.opts.Template != "" {
		if deny && p.opts.DenyEnforcement.byInit() {
			return "", pt, fmt.Errorf("Options.Template %s: corral cannot add the network-deny init container to a SandboxTemplate it did not make (use DenyEnforcement networkpolicy, or corral's own template)", p.opts.Template)
		}
		return p.opts.Template, pt, nil
	}
	b, err := json.Marshal(pt)
	if err != nil {
		return "", pt, err
	}
	sum := sha256.Sum256(b)
	return "corral-" + hex.EncodeToString(sum[:8]), pt, nil
}

// ensureTemplate makes corral's SandboxTemplate (and its warm pool when
// Options.WarmPool asks for one; never for the denied-network template)
// unless they exist, once per provider.
func (p *Provider) ensureTemplate(ctx context.Context, op string, deny bool) (string, error) {
	p.tmpl.mu.Lock()
	defer p.tmpl.mu.Unlock()
	if n := p.tmpl.names[deny]; n != "" {
		return n, nil
	}
	name, pt, err := p.templateName(deny)
	if err != nil {
		return "", sandbox.Errorf(sandbox.InvalidArgument, op, "", "%v", err)
	}
	meta := metav1.ObjectMeta{Name: name, Namespace: p.ns, Labels: map[string]string{LabelManaged: "true"}, Annotations: p.annotations(nil)}
	if p.opts.Template == "" {
		t := asTemplate{APIVersion: asExtGroup + "/" + asVersion, Kind: "SandboxTemplate", Metadata: meta}
		t.Spec.PodTemplate = pt
		if err := p.core.crCreate(ctx, asExtGroup, p.ns, "sandboxtemplates", t); err != nil && !apierrors.IsAlreadyExists(err) {
			return "", p.asError(op, name, err)
		}
	}
	if p.opts.WarmPool > 0 && !deny {
		w := asWarmPool{APIVersion: asExtGroup + "/" + asVersion, Kind: "SandboxWarmPool", Metadata: meta}
		w.Spec.Replicas, w.Spec.TemplateRef.Name = p.opts.WarmPool, name
		if err := p.core.crCreate(ctx, asExtGroup, p.ns, "sandboxwarmpools", w); err != nil && !apierrors.IsAlreadyExists(err) {
			return "", p.asError(op, name, err)
		}
	}
	if p.tmpl.names == nil {
		p.tmpl.names = map[bool]string{}
	}
	p.tmpl.names[deny] = name
	return name, nil
}

// templateMissing answers a claim's TemplateNotFound condition. The
// controller reports it from its informer cache, which can lag behind
// the template corral has just made, and retries on its own: while the
// template exists it is a wait. When the template is gone, corral's own
// is made again (someone deleted it under us); a missing template of
// Options.Template is the user's to fix.
func (p *Provider) templateMissing(ctx context.Context, op, claim, tmpl string) error {
	var t asTemplate
	err := p.core.crGet(ctx, asExtGroup, p.ns, "sandboxtemplates", tmpl, &t)
	switch {
	case err == nil && t.Metadata.DeletionTimestamp == nil:
		return nil
	case err != nil && !apierrors.IsNotFound(err):
		return p.asError(op, claim, err)
	case p.opts.Template != "":
		return sandbox.Errorf(sandbox.FailedPrecondition, op, claim, "SandboxTemplate %s/%s (Options.Template) does not exist", p.ns, tmpl)
	}
	// The claim names a template ensureTemplate made and remembered:
	// forgotten, it is made again.
	deny := false
	p.tmpl.mu.Lock()
	for d, n := range p.tmpl.names {
		if n == tmpl {
			deny = d
			delete(p.tmpl.names, d)
		}
	}
	p.tmpl.mu.Unlock()
	_, err = p.ensureTemplate(ctx, op, deny)
	return err
}

// asError is apiError with a hint when agent-sandbox is not installed
// (its resources are NotFound as a whole).
func (p *Provider) asError(op, id string, err error) error {
	var se *apierrors.StatusError
	if apierrors.IsNotFound(err) && errors.As(err, &se) && se.ErrStatus.Details != nil && se.ErrStatus.Details.Name == "" {
		return &sandbox.Error{Code: sandbox.FailedPrecondition, Op: op, ID: id,
			Msg: "agent-sandbox's CRDs are not installed on the cluster (Sandbox mode needs sigs.k8s.io/agent-sandbox with --extensions)", Err: err}
	}
	return p.apiError(op, id, err)
}

// createClaim is Create in Sandbox mode.
func (p *Provider) createClaim(ctx context.Context, op, name string, opts sandbox.CreateOptions) (*handle, func(), error) {
	lbl, ann, err := p.sandboxMeta(name, opts)
	if err != nil {
		return nil, nil, sandbox.Errorf(sandbox.InvalidArgument, op, opts.ID, "%v", err)
	}
	deny := opts.Network == sandbox.NetworkDeny
	tmpl, err := p.ensureTemplate(ctx, op, deny)
	if err != nil {
		return nil, nil, err
	}
	c := asClaim{APIVersion: asExtGroup + "/" + asVersion, Kind: "SandboxClaim",
		Metadata: metav1.ObjectMeta{Name: name, Namespace: p.ns, Labels: lbl, Annotations: ann}}
	c.Spec.TemplateRef.Name = tmpl
	sandbox.ReportProgress(ctx, sandbox.ProgressStep{Phase: "sandboxclaim", Subject: p.ns + "/" + name, Status: "creating"})
	if err := p.core.crCreate(ctx, asExtGroup, p.ns, "sandboxclaims", c); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil, nil, &sandbox.Error{Code: sandbox.AlreadyExists, Op: op, ID: opts.ID,
				Msg: fmt.Sprintf("a SandboxClaim named %s/%s exists already", p.ns, name), Err: err}
		}
		return nil, nil, p.asError(op, name, err)
	}
	pod := ""
	undo := func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		err := p.removeClaim(rctx, op, name, pod)
		if err == nil {
			err = p.removeExtras(rctx, op, name)
		}
		if err != nil {
			p.log.Warn("kubernetes: removing a half-created claim failed", "claim", name, "err", err)
		}
	}
	if pod, err = p.waitClaim(ctx, op, name); err == nil {
		err = p.adoptPod(ctx, op, name, pod, deny)
	}
	if err != nil {
		undo()
		return nil, nil, err
	}
	return p.newHandle(name, pod), undo, nil
}

// adoptPod labels the Pod serving a claim with the sandbox id (a warm
// pod does not have it), so that a Service or NetworkPolicy of the
// sandbox selects it, and makes the deny policy of a denied sandbox.
func (p *Provider) adoptPod(ctx context.Context, op, id, pod string, deny bool) error {
	lbl := map[string]string{LabelSandboxID: id}
	if deny {
		lbl[LabelNetwork] = string(sandbox.NetworkDeny)
	}
	if err := p.core.patchPodLabels(ctx, p.ns, pod, lbl); err != nil {
		return p.apiError(op, id, err)
	}
	if !deny {
		return nil
	}
	pd, err := p.core.getPod(ctx, p.ns, pod)
	if err != nil {
		return p.apiError(op, id, err)
	}
	return p.ensureDenyPolicy(ctx, op, id, pd)
}

// claimPod finds the Pod serving a claim: its Sandbox (named after the
// claim) names an adopted warm pod in an annotation, else the Pod has the
// Sandbox's name. "" while the Sandbox does not exist yet.
func (p *Provider) claimPod(ctx context.Context, c *asClaim) (string, error) {
	sbx := c.Status.Sandbox.Name
	if sbx == "" {
		sbx = c.Metadata.Name
	}
	var s asSandbox
	if err := p.core.crGet(ctx, asGroup, p.ns, "sandboxes", sbx, &s); err != nil {
		if apierrors.IsNotFound(err) {
			return "", nil
		}
		return "", err
	}
	if n := s.Metadata.Annotations[asPodNameAnnot]; n != "" {
		return n, nil
	}
	return s.Metadata.Name, nil
}

// waitClaim waits, at most Options.StartTimeout, for the claim's Pod to
// run and returns its name. A claim or Pod that is gone, or a Pod that
// cannot start, is an error naming why.
func (p *Provider) waitClaim(ctx context.Context, op, name string) (string, error) {
	wctx, cancel := context.WithTimeout(ctx, p.opts.StartTimeout)
	defer cancel()
	t := time.NewTicker(pollEvery)
	defer t.Stop()
	why := "no Sandbox yet"
	for {
		var c asClaim
		err := p.core.crGet(wctx, asExtGroup, p.ns, "sandboxclaims", name, &c)
		if err == nil && c.Metadata.DeletionTimestamp != nil {
			return "", sandbox.Errorf(sandbox.NotFound, op, name, "the SandboxClaim is being deleted")
		}
		var pod string
		if err == nil {
			for _, cond := range c.Status.Conditions {
				if cond.Type == asReadyCondition && cond.Status != metav1.ConditionTrue && cond.Reason != "" {
					why = cond.Reason + ": " + cond.Message
					if cond.Reason == "TemplateNotFound" {
						if err := p.templateMissing(wctx, op, name, c.Spec.TemplateRef.Name); err != nil {
							return "", err
						}
					}
				}
			}
			pod, err = p.claimPod(wctx, &c)
		}
		if err == nil && pod != "" {
			var pd *corev1.Pod
			pd, err = p.core.getPod(wctx, p.ns, pod)
			switch {
			case apierrors.IsNotFound(err):
				err, why = nil, "pod "+pod+" not made yet"
			case err != nil:
			default:
				if gone, w := podGone(pd); gone {
					return "", sandbox.Errorf(sandbox.NotFound, op, name, "the claim's pod %s %s", pod, w)
				}
				if running(pd) {
					return pod, nil
				}
				if w, stuck := cannotStart(pd); stuck {
					return "", sandbox.Errorf(sandbox.FailedPrecondition, op, name, "the claim's pod cannot start: %s", w)
				}
				why = pendingReason(pd)
			}
		}
		if err != nil {
			if ctx.Err() == nil && wctx.Err() != nil {
				return "", sandbox.Errorf(sandbox.DeadlineExceeded, op, name, "the claim's pod did not run within %v: %s", p.opts.StartTimeout, why)
			}
			return "", p.asError(op, name, err)
		}
		select {
		case <-t.C:
		case <-wctx.Done():
			if ctx.Err() != nil {
				return "", sandbox.Wrap(sandbox.Canceled, op, name, ctx.Err())
			}
			return "", sandbox.Errorf(sandbox.DeadlineExceeded, op, name, "the claim's pod did not run within %v: %s", p.opts.StartTimeout, why)
		}
	}
}

// lookupClaim finds corral's claim by sandbox id or key.
func (p *Provider) lookupClaim(ctx context.Context, op, id string) (*asClaim, error) {
	if id == "" {
		return nil, sandbox.Errorf(sandbox.InvalidArgument, op, id, "empty sandbox id")
	}
	for _, name := range []string{id, podName(id)} {
		if !validPodName.MatchString(name) {
			continue
		}
		var c asClaim
		err := p.core.crGet(ctx, asExtGroup, p.ns, "sandboxclaims", name, &c)
		if err == nil {
			if c.Metadata.Labels[LabelManaged] != "true" {
				return nil, sandbox.Errorf(sandbox.NotFound, op, id, "SandboxClaim %s/%s is not a corral sandbox", p.ns, name)
			}
			return &c, nil
		}
		if !apierrors.IsNotFound(err) {
			return nil, p.asError(op, id, err)
		}
	}
	var list asClaimList
	sel := labels.SelectorFromSet(labels.Set{LabelManaged: "true", LabelKeyHash: keyHash(id)}).String()
	if err := p.core.crList(ctx, asExtGroup, p.ns, "sandboxclaims", sel, &list); err != nil {
		return nil, p.asError(op, id, err)
	}
	for i := range list.Items {
		if list.Items[i].Metadata.Annotations[AnnotationKey] == id {
			return &list.Items[i], nil
		}
	}
	return nil, sandbox.Errorf(sandbox.NotFound, op, id, "no such sandbox (no corral SandboxClaim in namespace %s with that name or key)", p.ns)
}

// resumeClaim is Resume in Sandbox mode: a claim whose Sandbox or Pod is
// gone is NotFound (agent-sandbox would make a fresh Pod for a cold
// Sandbox, without the files).
func (p *Provider) resumeClaim(ctx context.Context, op, id string) (sandbox.Handle, error) {
	c, err := p.lookupClaim(ctx, op, id)
	if err != nil {
		return nil, err
	}
	name := c.Metadata.Name
	if c.Metadata.DeletionTimestamp != nil {
		return nil, sandbox.Errorf(sandbox.NotFound, op, id, "the sandbox's SandboxClaim is being deleted")
	}
	pod, err := p.claimPod(ctx, c)
	if err != nil {
		return nil, p.asError(op, id, err)
	}
	if pod == "" {
		return nil, sandbox.Errorf(sandbox.NotFound, op, id, "the SandboxClaim %s has no Sandbox", name)
	}
	pd, err := p.core.getPod(ctx, p.ns, pod)
	if apierrors.IsNotFound(err) {
		return nil, sandbox.Errorf(sandbox.NotFound, op, id, "the sandbox's pod %s is gone", pod)
	}
	if err != nil {
		return nil, p.apiError(op, id, err)
	}
	if gone, why := podGone(pd); gone {
		return nil, sandbox.Errorf(sandbox.NotFound, op, id, "the sandbox's pod %s", why)
	}
	if !running(pd) {
		if pod, err = p.waitClaim(ctx, op, name); err != nil {
			return nil, err
		}
	}
	if err := p.adoptPod(ctx, op, name, pod, c.Metadata.Labels[LabelNetwork] == string(sandbox.NetworkDeny)); err != nil {
		return nil, err
	}
	return p.newHandle(name, pod), nil
}

// destroyClaim is Destroy in Sandbox mode.
func (p *Provider) destroyClaim(ctx context.Context, op, id string) error {
	c, err := p.lookupClaim(ctx, op, id)
	if sandbox.CodeOf(err) == sandbox.NotFound && !isNotOurs(err) {
		return nil
	}
	if err != nil {
		return err
	}
	pod, _ := p.claimPod(ctx, c)
	if pod != "" {
		p.stopForwards(pod)
	}
	if err := p.removeClaim(ctx, op, c.Metadata.Name, pod); err != nil {
		return err
	}
	return p.removeExtras(ctx, op, c.Metadata.Name)
}

// removeClaim deletes a claim in the foreground (its Sandbox and Pod go
// first) and waits until the claim and the Pod are gone.
func (p *Provider) removeClaim(ctx context.Context, op, name, pod string) error {
	var podUID types.UID
	if pod != "" {
		if pd, err := p.core.getPod(ctx, p.ns, pod); err == nil {
			podUID = pd.UID
		}
	}
	fg := metav1.DeletePropagationForeground
	var zero int64
	err := p.core.crDelete(ctx, asExtGroup, p.ns, "sandboxclaims", name, metav1.DeleteOptions{PropagationPolicy: &fg, GracePeriodSeconds: &zero})
	if err != nil && !apierrors.IsNotFound(err) {
		return p.asError(op, name, err)
	}
	t := time.NewTicker(pollEvery)
	defer t.Stop()
	for {
		var c asClaim
		err := p.core.crGet(ctx, asExtGroup, p.ns, "sandboxclaims", name, &c)
		claimGone := apierrors.IsNotFound(err)
		if err != nil && !claimGone {
			return p.asError(op, name, err)
		}
		podGoneNow := true
		if podUID != "" {
			pd, err := p.core.getPod(ctx, p.ns, pod)
			podGoneNow = apierrors.IsNotFound(err) || err == nil && pd.UID != podUID
		}
		if claimGone && podGoneNow {
			p.log.Debug("kubernetes: sandbox claim destroyed", "id", name)
			return nil
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return sandbox.Wrap(sandbox.Canceled, op, name, ctx.Err())
		}
	}
}

// listClaims is List in Sandbox mode.
func (p *Provider) listClaims(ctx context.Context, sel string) ([]Sandbox, error) {
	var list asClaimList
	if err := p.core.crList(ctx, asExtGroup, p.ns, "sandboxclaims", sel, &list); err != nil {
		return nil, p.asError("kubernetes.list", p.ns, err)
	}
	out := make([]Sandbox, 0, len(list.Items))
	for _, c := range list.Items {
		s := Sandbox{ID: c.Metadata.Name, Key: c.Metadata.Annotations[AnnotationKey], Image: p.opts.Image,
			State: "Pending", CreatedAt: c.Metadata.CreationTimestamp.Time, Labels: c.Metadata.Labels}
		for _, cond := range c.Status.Conditions {
			if cond.Type == asReadyCondition && cond.Status == metav1.ConditionTrue {
				s.State = string(corev1.PodRunning)
			}
		}
		if c.Metadata.DeletionTimestamp != nil {
			s.State = "Terminating"
		}
		out = append(out, s)
	}
	return out, nil
}
