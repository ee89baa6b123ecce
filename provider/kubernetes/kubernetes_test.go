package kubernetes_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/provider/kubernetes"
	"github.com/d10ffeed/corral/provider/kubernetes/k8stest"
	"github.com/d10ffeed/corral/sandbox"
)

// TestSecretsStayOutOfThePod: create-time and per-command variables reach
// the command, and neither the Pod object nor the exec's argv holds them.
func TestSecretsStayOutOfThePod(t *testing.T) {
	p := newProvider(t, kubernetes.Options{})
	const canary = "corral-canary-7f3a\n'$(id)'"
	h := testutil.Create(t, p, sandbox.CreateOptions{Env: map[string]string{"CREATE_SECRET": canary}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := h.Exec(ctx, sandbox.Command{Args: []string{"sh", "-c", `printf '%s|%s|' "$CREATE_SECRET" "$CMD_SECRET"; cat /proc/[0-9]*/cmdline | tr '\0' ' '`},
		Env: map[string]string{"CMD_SECRET": canary}})
	if err != nil {
		t.Fatal(err)
	}
	out := string(res.Stdout)
	want := canary + "|" + canary + "|"
	if !strings.HasPrefix(out, want) {
		t.Fatalf("stdout %q, want the prefix %q (stderr %q)", out, want, res.Stderr)
	}
	if strings.Contains(strings.TrimPrefix(out, want), "corral-canary") {
		t.Fatalf("a command line holds the secret: %q", out)
	}
	name, ok := kubernetes.PodName(h)
	if !ok {
		t.Fatalf("%T is not a kubernetes handle", h)
	}
	js, err := kubernetes.PodJSON(ctx, p, name)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(js, []byte("corral-canary")) {
		t.Fatalf("the pod object holds the secret: %s", js)
	}
}

// TestResumeAndDestroy: Resume finds a sandbox by id and by key; after
// Destroy both are NotFound and a second Destroy succeeds.
func TestResumeAndDestroy(t *testing.T) {
	p := newProvider(t, kubernetes.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	key := "Thread/" + runID + ":resume" // not a valid pod name: stored as a digest name
	h, err := p.Create(ctx, sandbox.CreateOptions{ID: key})
	if err != nil {
		t.Fatal(err)
	}
	if h.ID() == key {
		t.Fatalf("id %q kept an invalid pod name", h.ID())
	}
	if err := h.FS().WriteFile(ctx, "kept.txt", []byte("kept")); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{h.ID(), key} {
		r, err := p.Resume(ctx, id)
		if err != nil {
			t.Fatalf("Resume(%q): %v", id, err)
		}
		b, err := r.FS().ReadFile(ctx, "kept.txt")
		if err != nil || string(b) != "kept" {
			t.Fatalf("Resume(%q): read %q, %v", id, b, err)
		}
	}
	if _, err := p.Create(ctx, sandbox.CreateOptions{ID: key}); sandbox.CodeOf(err) != sandbox.AlreadyExists {
		t.Fatalf("a second Create with the key: %v, want AlreadyExists", err)
	}
	if err := p.Destroy(ctx, key); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{h.ID(), key} {
		if _, err := p.Resume(ctx, id); sandbox.CodeOf(err) != sandbox.NotFound {
			t.Fatalf("Resume(%q) after Destroy: %v, want NotFound", id, err)
		}
	}
	if _, err := h.Exec(ctx, sandbox.Command{Args: []string{"true"}}); sandbox.CodeOf(err) != sandbox.NotFound {
		t.Fatalf("Exec after Destroy: %v, want NotFound", err)
	}
	if err := h.Destroy(ctx); err != nil {
		t.Fatalf("second Destroy: %v", err)
	}
}

// TestUnstartablePodNamesWhy: an image that cannot be had fails Create
// with the reason, and leaves no Pod.
func TestUnstartablePodNamesWhy(t *testing.T) {
	p := newProvider(t, kubernetes.Options{Image: "corral.local/no-such-image:1"})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	_, err := p.Create(ctx, sandbox.CreateOptions{ID: "unstartable-" + runID})
	if sandbox.CodeOf(err) != sandbox.FailedPrecondition || !strings.Contains(err.Error(), "ErrImageNeverPull") {
		t.Fatalf("Create: %v, want FailedPrecondition naming ErrImageNeverPull", err)
	}
	if _, err := p.Resume(ctx, "unstartable-"+runID); sandbox.CodeOf(err) != sandbox.NotFound {
		t.Fatalf("Resume: %v, want NotFound (the pod is removed)", err)
	}
}

// TestSandboxModeWarmPoolClaim: with a warm pool, a claim is served from
// one of the pool's running pods (the pod is the pool's, not named after
// the claim), files and commands work, resume by key finds it, and
// destroy removes the claim and the pod.
func TestSandboxModeWarmPoolClaim(t *testing.T) {
	p := sandboxModeProvider(t, kubernetes.Options{WarmPool: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// The first claim makes the template and the pool (it may already be
	// served from the pool: its controller is quick).
	first := testutil.Create(t, p, sandbox.CreateOptions{})
	// Wait for the pool's pod to run, then claim it.
	testutil.WaitFor(t, ctx, "the warm pool's one pod to run", 100*time.Millisecond, func(ctx context.Context) (bool, error) {
		pods, err := k8stest.Client(t).CoreV1().Pods(p.Namespace()).List(ctx, metav1.ListOptions{LabelSelector: "agents.x-k8s.io/pool"})
		return err == nil && len(pods.Items) == 1 && pods.Items[0].Status.Phase == corev1.PodRunning, err
	})
	h := testutil.Create(t, p, sandbox.CreateOptions{ID: "warm key/1"})
	pod, _ := kubernetes.PodName(h)
	firstPod, _ := kubernetes.PodName(first)
	t.Logf("first claim %s on pod %s; warm claim %s on pod %s", first.ID(), firstPod, h.ID(), pod)
	if pod == h.ID() {
		t.Errorf("the warm claim's pod is named after the claim (%s): not served from the pool", pod)
	}
	res, err := h.Exec(ctx, sandbox.Command{Shell: "echo warm > f && cat f"})
	if err != nil || string(res.Stdout) != "warm\n" {
		t.Fatalf("exec: %v %+v", err, res)
	}
	r, err := p.Resume(ctx, "warm key/1")
	if err != nil || r.ID() != h.ID() {
		t.Fatalf("resume by key: %v %v", r, err)
	}
	if err := h.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Resume(ctx, h.ID()); sandbox.CodeOf(err) != sandbox.NotFound {
		t.Fatalf("resume after destroy: %v, want NotFound", err)
	}
	if _, err := k8stest.Client(t).CoreV1().Pods(p.Namespace()).Get(ctx, pod, metav1.GetOptions{}); err == nil {
		t.Errorf("pod %s still there after destroy", pod)
	}
}
