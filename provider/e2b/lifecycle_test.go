package e2b_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/provider/e2b"
	"github.com/d10ffeed/corral/provider/registry"
	"github.com/d10ffeed/corral/sandbox"
)

// TestLifecycle: NetworkDeny turns internet access off, the key and the
// labels ride in metadata, Resume finds a sandbox by E2B's id or by the
// key, wakes a paused one, SetTimeout moves its end, and the registry's
// listing and prune see corral's sandboxes only.
func TestLifecycle(t *testing.T) {
	ctx := testutil.HangGuard(t)
	f := newFake(t)
	p, _ := newProvider(t, f, e2b.Options{Timeout: 10 * time.Minute})
	h := create(t, ctx, p, sandbox.CreateOptions{ID: "thread-key-1", Network: sandbox.NetworkDeny, Labels: map[string]string{"thread": "t1"}})
	var body e2b.NewSandbox
	for _, b := range f.Bodies() {
		if b.Route == "create" {
			if err := json.Unmarshal(b.Body, &body); err != nil {
				t.Fatal(err)
			}
		}
	}
	meta := f.Metadata(h.ID())
	t.Logf("create body: template %q, timeout %ds, allow_internet_access %v, metadata %v", body.TemplateID, body.Timeout, *body.AllowInternetAccess, meta)
	if body.AllowInternetAccess == nil || *body.AllowInternetAccess || body.Timeout != 600 || body.TemplateID != "base" || len(body.EnvVars) != 0 ||
		meta[e2b.MetaKey] != "thread-key-1" || meta[e2b.MetaManaged] != "1" || meta["thread"] != "t1" {
		t.Fatalf("create body %+v, metadata %v", body, meta)
	}
	if err := e2b.Pause(ctx, h, true); err != nil || !f.Paused(h.ID()) {
		t.Fatalf("Pause: %v (paused %v)", err, f.Paused(h.ID()))
	}
	if err := e2b.Pause(ctx, h, true); err != nil {
		t.Fatalf("Pause of a paused sandbox: %v", err)
	}
	byKey, err := p.Resume(ctx, "thread-key-1")
	if err != nil || byKey.ID() != h.ID() || f.Paused(h.ID()) {
		t.Fatalf("Resume by key: %v (id %v, paused %v)", err, byKey, f.Paused(h.ID()))
	}
	if res, err := byKey.Exec(ctx, sandbox.Command{Args: []string{"pwd"}}); err != nil || string(res.Stdout) != h.WorkspaceRoot()+"\n" {
		t.Fatalf("exec after resume: %v %q", err, res.Stdout)
	}
	end := f.EndAt(h.ID())
	if err := e2b.SetTimeout(ctx, h, time.Hour); err != nil || !f.EndAt(h.ID()).After(end) {
		t.Fatalf("SetTimeout: %v (end %v → %v)", err, end, f.EndAt(h.ID()))
	}
	if _, err := p.Resume(ctx, "no-such-key"); sandbox.CodeOf(err) != sandbox.NotFound {
		t.Fatalf("Resume of an unknown key: %v, want NotFound", err)
	}

	// The registry's management view: corral's sandboxes only.
	sdkMade := createRaw(t, f)
	mp := e2b.Managed{Provider: p}
	list, err := registry.Lister(mp).ListSandboxes(ctx)
	if err != nil || len(list) != 1 || list[0].ID != h.ID() || list[0].Key != "thread-key-1" {
		t.Fatalf("ListSandboxes: %v %+v", err, list)
	}
	rep, err := registry.Pruner(mp).Prune(ctx, registry.PruneOptions{OlderThan: time.Hour})
	if err != nil || len(rep.Sandboxes) != 0 {
		t.Fatalf("prune of sandboxes younger than an hour: %v %+v", err, rep)
	}
	rep, err = registry.Pruner(mp).Prune(ctx, registry.PruneOptions{})
	t.Logf("ls: %d of corral's (1 other sandbox on the account: %s); prune: %v", len(list), sdkMade, rep.Sandboxes)
	if err != nil || len(rep.Sandboxes) != 1 || len(f.Sandboxes("", nil)) != 1 {
		t.Fatalf("prune: %v %+v, %d left (want the other one)", err, rep, len(f.Sandboxes("", nil)))
	}
}

// createRaw makes a sandbox that is not corral's, as another E2B client would.
func createRaw(t *testing.T, f interface{ URL() string }) string {
	t.Helper()
	req, _ := httpNewJSON("POST", f.URL()+"/v2/sandboxes", `{"templateID":"base","metadata":{"owner":"someone-else"}}`)
	req.Header.Set(e2b.HeaderAPIKey, testKey)
	resp, err := httpDo(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var sb e2b.Sandbox
	if err := jsonDecode(resp.Body, &sb); err != nil {
		t.Fatal(err)
	}
	return sb.SandboxID
}

// TestEgressTranslated: an egress allow-list becomes E2B's domain rules
// (allowOut, denyOut ALL_TRAFFIC; ports 80 and 443 dropped), and an entry
// on another port is refused, since E2B filters names on those two only.
func TestEgressTranslated(t *testing.T) {
	ctx := testutil.HangGuard(t)
	f := newFake(t)
	p, _ := newProvider(t, f, e2b.Options{Timeout: 10 * time.Minute})
	create(t, ctx, p, sandbox.CreateOptions{ID: "eg-1", Egress: []string{"api.anthropic.com", "*.npmjs.org:443", "api.anthropic.com:80"}})
	var body e2b.NewSandbox
	for _, b := range f.Bodies() {
		if b.Route == "create" {
			if err := json.Unmarshal(b.Body, &body); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n := body.Network; n == nil || strings.Join(n.AllowOut, ",") != "api.anthropic.com,*.npmjs.org" || strings.Join(n.DenyOut, ",") != "0.0.0.0/0" {
		t.Fatalf("network %+v", body.Network)
	}
	var ne sandbox.NativeEgress
	if !sandbox.ProviderAs(p, &ne) {
		t.Fatal("e2b is not a sandbox.NativeEgress")
	}
	if err := ne.NativeEgress([]string{"db.example.com:5432"}); sandbox.CodeOf(err) != sandbox.FailedPrecondition || !strings.Contains(err.Error(), "ports 80 and 443") {
		t.Errorf("a list entry on port 5432: %v", err)
	}
}
