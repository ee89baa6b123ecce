package kubernetes_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/d10ffeed/corral/provider/kubernetes"
	"github.com/d10ffeed/corral/sandbox"
)

// TestSecretsStayOutOfThePod: create-time and per-command variables reach
// the command, and neither the Pod object nor the exec's argv holds them.
func TestSecretsStayOutOfThePod(t *testing.T) {
	p := newProvider(t, kubernetes.Options{})
	const canary = "corral-canary-7f3a\n'$(id)'"
	h := create(t, p, sandbox.CreateOptions{Env: map[string]string{"CREATE_SECRET": canary}})
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
