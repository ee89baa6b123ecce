package kubernetes

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/d10ffeed/corral/sandbox"
)

// With Options.Workspace WorkspacePVC (Pods mode) every sandbox has a
// PersistentVolumeClaim of its own, named after it (workspaceClaimName),
// made before its Pod and mounted at Workdir. The claim carries the Pod's
// labels and corral's annotations but no owner reference: it outlives the
// Pod, which is the point. So:
//
//   - Resume of a sandbox whose Pod is gone (deleted, evicted, finished)
//     but whose claim is there makes a new Pod of the same name on the
//     claim, from the labels and annotations the claim kept, and waits for
//     it: the files are those the sandbox had (processes and the
//     environment are not). A sandbox with neither is NotFound.
//   - Create of an id whose claim exists is AlreadyExists (the sandbox
//     exists; Resume it).
//   - Destroy deletes the Pod, then the claim, and waits for both to go
//     (what the claim's volume does then is its reclaim policy's
//     business).

// workspaceClaimName is the name of a sandbox's workspace claim.
func workspaceClaimName(id string) string { return id + "-workspace" }

// createWorkspace makes a sandbox's workspace claim.
func (p *Provider) createWorkspace(ctx context.Context, op, id string, lbl, ann map[string]string) error {
	size, _ := resource.ParseQuantity(p.opts.WorkspaceSize) // checked by New
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: workspaceClaimName(id), Namespace: p.ns, Labels: lbl, Annotations: ann},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}},
		},
	}
	if p.opts.StorageClass != "" {
		sc := p.opts.StorageClass
		pvc.Spec.StorageClassName = &sc
	}
	if _, err := p.core.createPVC(ctx, pvc); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return &sandbox.Error{Code: sandbox.AlreadyExists, Op: op, ID: id,
				Msg: fmt.Sprintf("a workspace claim %s/%s exists already (its sandbox's Pod may be gone: Resume makes a new one)", p.ns, pvc.Name), Err: err}
		}
		return p.apiError(op, id, err)
	}
	return nil
}

// lookupWorkspace finds corral's workspace claim of a sandbox by id or
// key.
func (p *Provider) lookupWorkspace(ctx context.Context, op, id string) (*corev1.PersistentVolumeClaim, error) {
	for _, name := range []string{id, podName(id)} {
		if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
			continue
		}
		pvc, err := p.core.getPVC(ctx, p.ns, workspaceClaimName(name))
		if err == nil && pvc.Labels[LabelManaged] == "true" {
			return pvc, nil
		}
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, p.apiError(op, id, err)
		}
	}
	sel := labels.SelectorFromSet(labels.Set{LabelManaged: "true", LabelKeyHash: keyHash(id)}).String()
	list, err := p.core.listPVCs(ctx, p.ns, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, p.apiError(op, id, err)
	}
	for i := range list.Items {
		if list.Items[i].Annotations[AnnotationKey] == id {
			return &list.Items[i], nil
		}
	}
	return nil, sandbox.Errorf(sandbox.NotFound, op, id, "no such sandbox (no corral pod or workspace claim in namespace %s with that name or key)", p.ns)
}

// resumeWorkspace makes a new Pod for a sandbox whose Pod is gone (old:
// the finished or evicted one, removed first; nil when there is none) on
// its workspace claim.
func (p *Provider) resumeWorkspace(ctx context.Context, op, id string, old *corev1.Pod) (sandbox.Handle, error) {
	pvc, err := p.lookupWorkspace(ctx, op, id)
	if err != nil {
		return nil, err
	}
	name := pvc.Labels[LabelSandboxID]
	if old != nil {
		if err := p.remove(ctx, op, old.Name, old.UID); err != nil {
			return nil, err
		}
	}
	ann := map[string]string{}
	for k, v := range pvc.Annotations {
		if strings.HasPrefix(k, "corral.dev/") {
			ann[k] = v
		}
	}
	sandbox.ReportProgress(ctx, sandbox.ProgressStep{Phase: "pod", Subject: p.ns + "/" + name, Status: "re-creating on its workspace claim"})
	created, err := p.core.createPod(ctx, p.newPod(name, pvc.Labels, p.annotations(ann)))
	switch {
	case apierrors.IsAlreadyExists(err): // another process re-made it: wait for that one
		if created, err = p.core.getPod(ctx, p.ns, name); err != nil {
			return nil, p.apiError(op, id, err)
		}
	case err != nil:
		return nil, p.apiError(op, id, err)
	}
	if denied(created) {
		if err := p.ensureDenyPolicy(ctx, op, name, created); err != nil {
			return nil, err
		}
	}
	if _, err := p.waitRunning(ctx, op, name); err != nil {
		return nil, err
	}
	p.log.Debug("kubernetes: pod re-created on its workspace claim", "id", name)
	return p.newHandle(name, name), nil
}

// removeWorkspace deletes a sandbox's workspace claim and waits for it to
// go (after its Pod: the claim's protection holds it while a Pod uses it).
func (p *Provider) removeWorkspace(ctx context.Context, op, id string) error {
	name := workspaceClaimName(id)
	err := p.core.deleteNamed(ctx, p.ns, "persistentvolumeclaims", name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return p.apiError(op, id, err)
	}
	t := time.NewTicker(pollEvery)
	defer t.Stop()
	for {
		if _, err := p.core.getPVC(ctx, p.ns, name); apierrors.IsNotFound(err) {
			return nil
		} else if err != nil {
			return p.apiError(op, id, err)
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return sandbox.Wrap(sandbox.Canceled, op, id, ctx.Err())
		}
	}
}
