package kubernetes_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/provider/kubernetes"
	"github.com/d10ffeed/corral/provider/kubernetes/k8stest"
	"github.com/d10ffeed/corral/sandbox"
)

// templatesPath is the API path of the SandboxTemplates in ns.
func templatesPath(ns string) string {
	return "/apis/extensions.agents.x-k8s.io/v1alpha1/namespaces/" + ns + "/sandboxtemplates"
}

// templateNames lists the names of the SandboxTemplates in ns.
func templateNames(t *testing.T, ctx context.Context, ns string) []string {
	t.Helper()
	raw, err := k8stest.Client(t).CoreV1().RESTClient().Get().AbsPath(templatesPath(ns)).DoRaw(ctx)
	if err != nil {
		t.Fatalf("list SandboxTemplates: %v", err)
	}
	var list struct {
		Items []struct {
			Metadata metav1.ObjectMeta `json:"metadata"`
		} `json:"items"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, it := range list.Items {
		names = append(names, it.Metadata.Name)
	}
	return names
}

// TestSandboxModeTemplateDeletedUnderUs: the provider remembers the
// template it made; when somebody deletes it, the next claim is answered
// TemplateNotFound by agent-sandbox's controller, and the provider makes
// the template again instead of failing the create. (The same answer
// comes, for a moment, for a template just made: the controller's cache
// lags behind; that one is a wait.)
func TestSandboxModeTemplateDeletedUnderUs(t *testing.T) {
	p := sandboxModeProvider(t, kubernetes.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	testutil.Create(t, p, sandbox.CreateOptions{})
	names := templateNames(t, ctx, p.Namespace())
	if len(names) != 1 {
		t.Fatalf("templates after the first create: %v, want one", names)
	}
	if err := k8stest.Client(t).CoreV1().RESTClient().Delete().AbsPath(templatesPath(p.Namespace()), names[0]).Do(ctx).Error(); err != nil {
		t.Fatalf("delete the template: %v", err)
	}
	h := testutil.Create(t, p, sandbox.CreateOptions{})
	if res, err := h.Exec(ctx, sandbox.Command{Shell: "echo ok"}); err != nil || string(res.Stdout) != "ok\n" {
		t.Fatalf("exec in the second sandbox: %v %+v", err, res)
	}
	if again := templateNames(t, ctx, p.Namespace()); len(again) != 1 || again[0] != names[0] {
		t.Errorf("templates after the second create: %v, want [%s] made again", again, names[0])
	}
}

// TestSandboxModeMissingUserTemplate: a claim of an Options.Template that
// does not exist fails FailedPrecondition naming it, and leaves no claim.
func TestSandboxModeMissingUserTemplate(t *testing.T) {
	p := sandboxModeProvider(t, kubernetes.Options{Template: "no-such-template"})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	_, err := p.Create(ctx, sandbox.CreateOptions{ID: "missing-template"})
	if sandbox.CodeOf(err) != sandbox.FailedPrecondition {
		t.Fatalf("Create: %v, want FailedPrecondition", err)
	}
	t.Logf("Create: %v", err)
	raw, err := k8stest.Client(t).CoreV1().RESTClient().Get().
		AbsPath("/apis/extensions.agents.x-k8s.io/v1alpha1/namespaces/" + p.Namespace() + "/sandboxclaims").DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(raw, &list); err != nil || len(list.Items) != 0 {
		t.Errorf("claims left: %d (%v)", len(list.Items), err)
	}
}
