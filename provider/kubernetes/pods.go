package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/d10ffeed/corral/sandbox"
)

// pollEvery is how often Create, Resume and Destroy look at a Pod while
// they wait for it to run or go.
const pollEvery = 50 * time.Millisecond

// Create makes a Pod for the sandbox and waits for it to run.
//
// The Pod is named after opts.ID when given (see podName) and carries
// corral's labels and opts.Labels; opts.Env is kept in the handle and
// sent with every command, never in the Pod spec. An existing Pod of that
// name is AlreadyExists. A Pod that cannot start within
// Options.StartTimeout is deleted and the error names why. An egress
// allow-list becomes the sandbox's egress NetworkPolicy (egress.go), or is
// refused.
func (p *Provider) Create(ctx context.Context, opts sandbox.CreateOptions) (sandbox.Handle, error) {
	const op = "kubernetes.create"
	for k := range opts.Env {
		if err := sandbox.ValidateEnvName(k); err != nil {
			return nil, err
		}
	}
	if len(opts.Egress) > 0 {
		if err := p.NativeEgress(opts.Egress); err != nil {
			return nil, err // refused before anything is made
		}
	}
	name := newName()
	if opts.ID != "" {
		name = podName(opts.ID)
	}
	mk := p.createPod
	if p.opts.Mode == ModeSandbox {
		mk = p.createClaim
	}
	h, undo, err := mk(ctx, op, name, opts)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (sandbox.Handle, error) {
		undo()
		return nil, err
	}
	if err := h.Env().Set(opts.Env); err != nil {
		return fail(err)
	}
	if opts.SourceDir != "" {
		if err := sandbox.UploadDir(ctx, h.FS(), opts.SourceDir, Name); err != nil {
			return fail(sandbox.Wrap(sandbox.Internal, op, name, err))
		}
	}
	p.log.Debug("kubernetes: sandbox created", "id", name, "pod", h.pod, "namespace", p.ns, "image", p.opts.Image)
	return h, nil
}

// createPod is Create in Pods mode: the Pod, waited for until it runs.
// undo deletes it.
func (p *Provider) createPod(ctx context.Context, op, name string, opts sandbox.CreateOptions) (*handle, func(), error) {
	lbl, ann, err := p.sandboxMeta(name, opts)
	if err != nil {
		return nil, nil, sandbox.Errorf(sandbox.InvalidArgument, op, opts.ID, "%v", err)
	}
	if p.opts.Workspace == WorkspacePVC {
		if err := p.createWorkspace(ctx, op, name, lbl, ann); err != nil {
			return nil, nil, err
		}
	}
	extras := func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if err := p.removeExtras(rctx, op, name); err != nil {
			p.log.Warn("kubernetes: removing a half-created sandbox's objects failed", "id", name, "err", err)
		}
	}
	sandbox.ReportProgress(ctx, sandbox.ProgressStep{Phase: "pod", Subject: p.ns + "/" + name, Status: "creating"})
	created, err := p.core.createPod(ctx, p.newPod(name, lbl, ann))
	if err != nil {
		if p.opts.Workspace == WorkspacePVC {
			extras()
		}
		if apierrors.IsAlreadyExists(err) {
			return nil, nil, &sandbox.Error{Code: sandbox.AlreadyExists, Op: op, ID: opts.ID,
				Msg: fmt.Sprintf("a pod named %s/%s exists already", p.ns, name), Err: err}
		}
		return nil, nil, p.apiError(op, name, err)
	}
	undo := func() {
		p.deleteQuietly(ctx, name, created.UID)
		extras()
	}
	if len(opts.Egress) > 0 {
		if err := p.ensureEgressPolicy(ctx, op, name, opts.Egress); err != nil {
			undo()
			return nil, nil, err
		}
	}
	if denied(created) {
		if err := p.ensureDenyPolicy(ctx, op, name, created); err != nil {
			undo()
			return nil, nil, err
		}
	}
	if _, err := p.waitRunning(ctx, op, name); err != nil {
		undo()
		return nil, nil, err
	}
	return p.newHandle(name, name), undo, nil
}

// sandboxMeta returns the labels and annotations of a new sandbox's
// objects.
func (p *Provider) sandboxMeta(name string, opts sandbox.CreateOptions) (lbl, ann map[string]string, err error) {
	if lbl, err = p.userLabels(opts.Labels); err != nil {
		return nil, nil, err
	}
	lbl[LabelSandboxID] = name
	if opts.Network == sandbox.NetworkDeny {
		lbl[LabelNetwork] = string(sandbox.NetworkDeny)
	}
	own := map[string]string{AnnotationCreatedAt: time.Now().UTC().Format(time.RFC3339Nano)}
	if opts.ID != "" {
		lbl[LabelKeyHash] = keyHash(opts.ID)
		own[AnnotationKey] = opts.ID
	}
	return lbl, p.annotations(own), nil
}

// newPod builds a sandbox's Pod (Pods mode).
func (p *Provider) newPod(name string, lbl, ann map[string]string) *corev1.Pod {
	spec := p.sandboxPodSpec(lbl[LabelNetwork] == string(sandbox.NetworkDeny))
	if p.opts.Workspace == WorkspacePVC {
		spec.Volumes[0].VolumeSource = corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: workspaceClaimName(name)}}
	}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: p.ns, Labels: lbl, Annotations: ann}, Spec: spec}
}

// userLabels merges Options.Labels and extra (which wins), checks them,
// and adds LabelManaged.
func (p *Provider) userLabels(extra map[string]string) (map[string]string, error) {
	lbl := map[string]string{}
	for k, v := range p.opts.Labels {
		lbl[k] = v
	}
	for k, v := range extra {
		lbl[k] = v
	}
	for k, v := range lbl {
		if strings.HasPrefix(k, "corral.dev/") {
			return nil, fmt.Errorf("label %q: the corral.dev/ prefix is corral's own", k)
		}
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return nil, fmt.Errorf("label key %q: %s", k, strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			return nil, fmt.Errorf("label %q value %q: %s", k, v, strings.Join(errs, "; "))
		}
	}
	lbl[LabelManaged] = "true"
	return lbl, nil
}

// sandboxPodSpec is the shape of every sandbox's Pod (Pods mode) and of
// corral's SandboxTemplates (Sandbox mode), with its network denied or
// not.
func (p *Provider) sandboxPodSpec(deny bool) corev1.PodSpec {
	no := false
	var zero int64
	spec := corev1.PodSpec{
		RestartPolicy:                 corev1.RestartPolicyNever,
		AutomountServiceAccountToken:  &no,
		EnableServiceLinks:            &no,
		TerminationGracePeriodSeconds: &zero,
		ServiceAccountName:            p.opts.ServiceAccount,
		NodeSelector:                  p.opts.NodeSelector,
		Containers: []corev1.Container{{
			Name:            containerName,
			Image:           p.opts.Image,
			ImagePullPolicy: p.opts.PullPolicy,
			Command:         keepAlive,
			WorkingDir:      p.opts.Workdir,
			Resources:       p.resources,
			VolumeMounts:    []corev1.VolumeMount{{Name: "workspace", MountPath: p.opts.Workdir}},
			SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: &no},
		}},
		Volumes: []corev1.Volume{{Name: "workspace", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
	}
	if p.opts.RuntimeClassName != "" {
		rc := p.opts.RuntimeClassName
		spec.RuntimeClassName = &rc
	}
	p.shapePod(&spec, deny)
	return spec
}

// waitRunning waits for the Pod to run, at most Options.StartTimeout. A
// Pod that is gone, finished or cannot start is an error naming why.
func (p *Provider) waitRunning(ctx context.Context, op, name string) (*corev1.Pod, error) {
	wctx, cancel := context.WithTimeout(ctx, p.opts.StartTimeout)
	defer cancel()
	t := time.NewTicker(pollEvery)
	defer t.Stop()
	var last *corev1.Pod
	for {
		pod, err := p.core.getPod(wctx, p.ns, name)
		if err != nil {
			if ctx.Err() == nil && wctx.Err() != nil {
				return nil, sandbox.Errorf(sandbox.DeadlineExceeded, op, name, "the pod did not run within %v: %s", p.opts.StartTimeout, pendingReason(last))
			}
			return nil, p.apiError(op, name, err)
		}
		last = pod
		if why, failed := initFailed(pod); failed {
			return nil, sandbox.Errorf(sandbox.FailedPrecondition, op, name, "the pod cannot start: %s", why)
		}
		if gone, why := podGone(pod); gone {
			return nil, sandbox.Errorf(sandbox.NotFound, op, name, "the pod %s", why)
		}
		if running(pod) {
			return pod, nil
		}
		if why, stuck := cannotStart(pod); stuck {
			return nil, sandbox.Errorf(sandbox.FailedPrecondition, op, name, "the pod cannot start: %s", why)
		}
		select {
		case <-t.C:
		case <-wctx.Done():
			if ctx.Err() != nil {
				return nil, sandbox.Wrap(sandbox.Canceled, op, name, ctx.Err())
			}
			return nil, sandbox.Errorf(sandbox.DeadlineExceeded, op, name, "the pod did not run within %v: %s", p.opts.StartTimeout, pendingReason(pod))
		}
	}
}

// running reports whether the sandbox container runs.
func running(pod *corev1.Pod) bool {
	if pod.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == containerName {
			return cs.State.Running != nil
		}
	}
	return false
}

// podGone reports a Pod that is being deleted or has finished: for corral
// the sandbox is gone.
func podGone(pod *corev1.Pod) (bool, string) {
	switch {
	case pod.DeletionTimestamp != nil:
		return true, "is being deleted"
	case pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded:
		why := "has ended (" + string(pod.Status.Phase) + ")"
		if pod.Status.Reason != "" {
			why += ": " + pod.Status.Reason + " " + pod.Status.Message
		}
		return true, strings.TrimSpace(why)
	}
	return false, ""
}

// cannotStart names a Pod that will not start without a change: an image
// that cannot be had, a container that cannot be made.
func cannotStart(pod *corev1.Pod) (string, bool) {
	for _, cs := range pod.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil && stuckReasons[w.Reason] {
			return w.Reason + ": " + w.Message, true
		}
		if t := cs.State.Terminated; t != nil {
			return fmt.Sprintf("the container exited (%d %s): %s", t.ExitCode, t.Reason, t.Message), true
		}
	}
	return "", false
}

// stuckReasons are the waiting reasons of a container that will not start
// without a change: an image that cannot be had, a container that cannot
// be made.
var stuckReasons = map[string]bool{"ErrImagePull": true, "ImagePullBackOff": true, "ErrImageNeverPull": true,
	"InvalidImageName": true, "CreateContainerConfigError": true, "CreateContainerError": true, "RunContainerError": true}

// initFailed names an init container (the network-deny one) that failed
// or cannot start, on a Pod that is not being deleted.
func initFailed(pod *corev1.Pod) (string, bool) {
	if pod.DeletionTimestamp != nil {
		return "", false
	}
	for _, cs := range pod.Status.InitContainerStatuses {
		if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
			return fmt.Sprintf("init container %s exited (%d %s): %s", cs.Name, t.ExitCode, t.Reason, t.Message), true
		}
		if w := cs.State.Waiting; w != nil && stuckReasons[w.Reason] {
			return "init container " + cs.Name + ": " + w.Reason + ": " + w.Message, true
		}
	}
	return "", false
}

// pendingReason says why a Pod has not run yet, for a timeout's message.
func pendingReason(pod *corev1.Pod) string {
	if pod == nil {
		return "no status seen"
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status != corev1.ConditionTrue {
			return "not scheduled: " + c.Reason + " " + c.Message
		}
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil {
			return "container waiting: " + w.Reason + " " + w.Message
		}
	}
	return "phase " + string(pod.Status.Phase)
}

// Resume reconnects to a running sandbox by its id (the Pod name) or the
// CreateOptions.ID it was created with. A Pod that is gone, being deleted
// or finished, or one corral did not make, is NotFound; with a
// PersistentVolumeClaim workspace a sandbox whose Pod is gone but whose
// claim is not gets a new Pod on the claim (see workspace.go). The environment
// given at create is not persisted: re-apply it with SetEnv.
func (p *Provider) Resume(ctx context.Context, id string) (sandbox.Handle, error) {
	const op = "kubernetes.resume"
	if p.opts.Mode == ModeSandbox {
		return p.resumeClaim(ctx, op, id)
	}
	pod, err := p.lookup(ctx, op, id)
	if p.opts.Workspace == WorkspacePVC {
		if sandbox.CodeOf(err) == sandbox.NotFound && !isNotOurs(err) {
			return p.resumeWorkspace(ctx, op, id, nil)
		}
		if err == nil {
			if gone, _ := podGone(pod); gone {
				return p.resumeWorkspace(ctx, op, id, pod)
			}
		}
	}
	if err != nil {
		return nil, err
	}
	if gone, why := podGone(pod); gone {
		return nil, sandbox.Errorf(sandbox.NotFound, op, id, "the sandbox's pod %s", why)
	}
	if !running(pod) {
		if _, err := p.waitRunning(ctx, op, pod.Name); err != nil {
			return nil, err
		}
	}
	return p.newHandle(pod.Name, pod.Name), nil
}

// lookup finds corral's Pod by sandbox id or key.
func (p *Provider) lookup(ctx context.Context, op, id string) (*corev1.Pod, error) {
	if id == "" {
		return nil, sandbox.Errorf(sandbox.InvalidArgument, op, id, "empty sandbox id")
	}
	for _, name := range []string{id, podName(id)} {
		if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
			continue
		}
		pod, err := p.core.getPod(ctx, p.ns, name)
		if err == nil {
			if pod.Labels[LabelManaged] != "true" {
				return nil, sandbox.Errorf(sandbox.NotFound, op, id, "pod %s/%s is not a corral sandbox", p.ns, name)
			}
			return pod, nil
		}
		if !apierrors.IsNotFound(err) {
			return nil, p.apiError(op, id, err)
		}
	}
	sel := labels.SelectorFromSet(labels.Set{LabelManaged: "true", LabelKeyHash: keyHash(id)}).String()
	list, err := p.core.listPods(ctx, p.ns, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, p.apiError(op, id, err)
	}
	for i := range list.Items {
		if list.Items[i].Annotations[AnnotationKey] == id {
			return &list.Items[i], nil
		}
	}
	return nil, sandbox.Errorf(sandbox.NotFound, op, id, "no such sandbox (no corral pod in namespace %s with that name or key)", p.ns)
}

// Destroy deletes the sandbox's Pod at once (no grace) and waits until it
// is gone, so its name can be used again. A sandbox that is already gone
// is fine; a Pod corral did not make is left alone (NotFound).
func (p *Provider) Destroy(ctx context.Context, id string) error {
	const op = "kubernetes.destroy"
	if p.opts.Mode == ModeSandbox {
		return p.destroyClaim(ctx, op, id)
	}
	pod, err := p.lookup(ctx, op, id)
	if sandbox.CodeOf(err) == sandbox.NotFound && !isNotOurs(err) {
		if p.opts.Workspace == WorkspacePVC { // the Pod is gone, the claim may not be
			if pvc, werr := p.lookupWorkspace(ctx, op, id); werr == nil {
				return p.removeExtras(ctx, op, pvc.Labels[LabelSandboxID])
			}
		}
		return nil
	}
	if err != nil {
		return err
	}
	p.stopForwards(pod.Name)
	if err := p.remove(ctx, op, pod.Name, pod.UID); err != nil {
		return err
	}
	return p.removeExtras(ctx, op, pod.Name)
}

// isNotOurs reports lookup's NotFound for an object corral did not make.
func isNotOurs(err error) bool { return strings.Contains(err.Error(), "not a corral sandbox") }

// remove deletes a Pod (only the one with that uid) and waits for it to go.
func (p *Provider) remove(ctx context.Context, op, name string, uid types.UID) error {
	var zero int64
	err := p.core.deletePod(ctx, p.ns, name, metav1.DeleteOptions{
		GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &uid}})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil // gone, or a new Pod of that name that is not ours to delete
	}
	if err != nil {
		return p.apiError(op, name, err)
	}
	t := time.NewTicker(pollEvery)
	defer t.Stop()
	for {
		pod, err := p.core.getPod(ctx, p.ns, name)
		if apierrors.IsNotFound(err) || err == nil && pod.UID != uid {
			p.log.Debug("kubernetes: sandbox destroyed", "id", name)
			return nil
		}
		if err != nil {
			return p.apiError(op, name, err)
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return sandbox.Wrap(sandbox.Canceled, op, name, ctx.Err())
		}
	}
}

// deleteQuietly removes a half-made Pod, logging a failure.
func (p *Provider) deleteQuietly(ctx context.Context, name string, uid types.UID) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if err := p.remove(rctx, "kubernetes.create", name, uid); err != nil {
		p.log.Warn("kubernetes: removing a half-created pod failed", "pod", name, "err", err)
	}
}

// apiError maps a client-go error to corral's codes.
func (p *Provider) apiError(op, id string, err error) error {
	if err == nil {
		return nil
	}
	var coded interface{ ErrorCode() sandbox.Code }
	if errors.As(err, &coded) {
		return err
	}
	code := sandbox.Unknown
	switch {
	case errors.Is(err, context.Canceled):
		code = sandbox.Canceled
	case errors.Is(err, context.DeadlineExceeded):
		code = sandbox.DeadlineExceeded
	case apierrors.IsNotFound(err):
		code = sandbox.NotFound
	case apierrors.IsAlreadyExists(err):
		code = sandbox.AlreadyExists
	case apierrors.IsUnauthorized(err) || apierrors.IsForbidden(err):
		code = sandbox.PermissionDenied
	case apierrors.IsInvalid(err) || apierrors.IsBadRequest(err):
		code = sandbox.InvalidArgument
	case apierrors.IsConflict(err):
		code = sandbox.FailedPrecondition
	case apierrors.IsTooManyRequests(err):
		code = sandbox.ResourceExhausted
	case apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsServiceUnavailable(err) ||
		apierrors.IsInternalError(err) || apierrors.IsUnexpectedServerError(err):
		code = sandbox.Unavailable
	default:
		var ne net.Error
		if errors.As(err, &ne) || strings.Contains(err.Error(), "connection refused") {
			code = sandbox.Unavailable
		}
	}
	return &sandbox.Error{Code: code, Op: op, ID: id, Err: err}
}
