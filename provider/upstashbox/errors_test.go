package upstashbox_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/d10ffeed/corral/internal/fakecloud"
	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/provider/upstashbox"
	"github.com/d10ffeed/corral/sandbox"
)

// TestErrors: a missing key names UPSTASH_BOX_API_KEY; 401, 403, 404
// and 429 become codes naming the backend with its message and request
// id; no error carries the key.
func TestErrors(t *testing.T) {
	ctx := testutil.HangGuard(t)
	if _, err := upstashbox.New(upstashbox.Options{}); sandbox.CodeOf(err) != sandbox.FailedPrecondition || !strings.Contains(err.Error(), "UPSTASH_BOX_API_KEY") {
		t.Errorf("missing key: %v", err)
	}
	f := newFake(t)
	cases := []struct {
		name   string
		key    string
		fault  *fakecloud.Fault
		op     func(p *upstashbox.Provider) error
		code   sandbox.Code
		substr string
	}{
		{"bad key", "box_wrong_key_0000", nil, func(p *upstashbox.Provider) error { _, err := p.Resume(ctx, "x"); return err },
			sandbox.PermissionDenied, "invalid or missing API key"},
		{"403", "", &fakecloud.Fault{Status: http.StatusForbidden}, func(p *upstashbox.Provider) error { _, err := p.Resume(ctx, "x"); return err },
			sandbox.PermissionDenied, "403"},
		{"404", "", nil, func(p *upstashbox.Provider) error { _, err := p.Resume(ctx, "no-such-box"); return err },
			sandbox.NotFound, "box not found"},
		{"429", "", &fakecloud.Fault{Status: http.StatusTooManyRequests, RetryAfter: "3", Times: 10}, func(p *upstashbox.Provider) error { _, err := p.Resume(ctx, "x"); return err },
			sandbox.ResourceExhausted, "429"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, sl := newProvider(t, f, upstashbox.Options{APIKey: c.key})
			if c.fault != nil {
				f.Inject("get", *c.fault)
			}
			err := c.op(p)
			if sandbox.CodeOf(err) != c.code || !strings.Contains(err.Error(), c.substr) || !strings.Contains(err.Error(), "upstashbox") {
				t.Errorf("got %v (code %v), want %v with %q", err, sandbox.CodeOf(err), c.code, c.substr)
			}
			if strings.Contains(err.Error(), testKey) || (c.key != "" && strings.Contains(err.Error(), c.key)) {
				t.Errorf("the key leaked into %q", err)
			}
			if !strings.Contains(err.Error(), "req-") {
				t.Errorf("no request id in %q", err)
			}
			t.Logf("%s: %v (pauses asked: %v)", c.name, err, sl.All())
		})
	}
}

// TestCreateReconciled: a create accepted then answered 504 is looked up
// by name: one box, and Destroy leaves none.
func TestCreateReconciled(t *testing.T) {
	ctx := testutil.HangGuard(t)
	f := newFake(t)
	p, _ := newProvider(t, f, upstashbox.Options{})
	in := f.Inject("create", fakecloud.Fault{Accept: true, Status: http.StatusGatewayTimeout})
	h, err := p.Create(ctx, sandbox.CreateOptions{ID: "reconcile-me"})
	if err != nil {
		t.Fatal(err)
	}
	boxes := f.Boxes()
	if err := h.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("create accepted then 504: %d fault hits, %d create requests, %d box(es) made, %d left after Destroy", in.Hits(), f.Count("create"), boxes, f.Boxes())
	if boxes != 1 || f.Boxes() != 0 {
		t.Errorf("boxes: %d made, %d left; want 1 and 0", boxes, f.Boxes())
	}
}

// TestSecretsNeverInRESTBodies: the create env and SetEnv reach commands
// (Exec and Spawn) and no REST body (create, HTTP exec) holds them.
func TestSecretsNeverInRESTBodies(t *testing.T) {
	ctx := testutil.HangGuard(t)
	f := newFake(t)
	p, _ := newProvider(t, f, upstashbox.Options{})
	const canary = "canary-5ec4e7-do-not-leak"
	h := create(t, ctx, p, sandbox.CreateOptions{ID: "secrets", Env: map[string]string{"SECRET_A": canary + "-a"}})
	if err := h.SetEnv(ctx, map[string]string{"SECRET_B": canary + "-b"}); err != nil {
		t.Fatal(err)
	}
	res, err := h.Exec(ctx, sandbox.Command{Shell: `printf '%s|%s' "$SECRET_A" "$SECRET_B"`})
	if err != nil || string(res.Stdout) != canary+"-a|"+canary+"-b" {
		t.Fatalf("exec saw %q (%v)", res.Stdout, err)
	}
	pr, err := h.Spawn(ctx, sandbox.Command{Shell: `printf '%s' "$SECRET_B" > spawned.txt`})
	if err != nil {
		t.Fatal(err)
	}
	if code, err := pr.Wait(ctx); err != nil || code != 0 {
		t.Fatalf("spawn: %d %v", code, err)
	}
	got, err := h.FS().ReadFile(ctx, "spawned.txt")
	if err != nil || string(got) != canary+"-b" {
		t.Fatalf("spawn saw %q (%v)", got, err)
	}
	bodies := f.Bodies()
	for _, b := range bodies {
		if strings.Contains(string(b.Body), canary) {
			t.Errorf("the secret reached %s %s: %s", b.Method, b.Path, b.Body)
		}
	}
	t.Logf("secrets reached Exec and Spawn; %d REST bodies checked, none holds them", len(bodies))
}
