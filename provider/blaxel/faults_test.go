package blaxel_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/d10ffeed/corral/internal/fakecloud"
	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/provider/blaxel"
	"github.com/d10ffeed/corral/sandbox"
)

// TestCreateUnknownOutcome: a create whose answer is lost is reconciled
// by name. Accepted then 504 (the edge's answer to a create the control
// plane made): the sandbox carrying this attempt's label is adopted, no
// second create is sent. 503 and 429 before the backend made anything:
// the name stays unknown for the looks, and the create is sent again. In
// every case exactly one sandbox exists at the end.
func TestCreateUnknownOutcome(t *testing.T) {
	for _, tc := range []struct {
		name    string
		fault   fakecloud.Fault
		creates int
	}{
		{"accepted-then-504", fakecloud.Fault{Status: http.StatusGatewayTimeout, Accept: true}, 1},
		{"accepted-then-502", fakecloud.Fault{Status: http.StatusBadGateway, Accept: true}, 1},
		{"refused-503", fakecloud.Fault{Status: http.StatusServiceUnavailable}, 2},
		{"refused-429", fakecloud.Fault{Status: http.StatusTooManyRequests, RetryAfter: "1"}, 2},
		{"refused-408", fakecloud.Fault{Status: http.StatusRequestTimeout}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newFake(t)
			ctx := testutil.HangGuard(t)
			p, sl := newProvider(t, s, blaxel.Options{})
			in := s.Inject("create", tc.fault)
			h, err := p.Create(ctx, sandbox.CreateOptions{ID: "unknown-outcome"})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = h.Destroy(context.Background()) })
			if in.Hits() != 1 || s.Count("create") != tc.creates {
				t.Fatalf("fault hits %d, creates %d; want 1, %d", in.Hits(), s.Count("create"), tc.creates)
			}
			if names := s.Names(); len(names) != 1 || names[0] != "unknown-outcome" {
				t.Fatalf("sandboxes after the create: %v", names)
			}
			res, err := h.Exec(ctx, sandbox.Command{Shell: "echo ok"})
			if err != nil || string(res.Stdout) != "ok\n" {
				t.Fatalf("exec after the reconciled create: %v %+v", err, res)
			}
			t.Logf("%s: %d create(s) sent, %d look(s) by name, %d pause(s), 1 sandbox", tc.name, s.Count("create"), s.Count("get"), len(sl.All()))
		})
	}
}

// TestCreateConflictNotOurs: a 409 for a name another create made (no
// label of this attempt) is AlreadyExists, and that sandbox is left alone:
// reconcile never deletes what it did not make.
func TestCreateConflictNotOurs(t *testing.T) {
	s := newFake(t)
	ctx := testutil.HangGuard(t)
	p, _ := newProvider(t, s, blaxel.Options{})
	first, err := p.Create(ctx, sandbox.CreateOptions{ID: "taken"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = first.Destroy(context.Background()) })
	label := s.Labels("taken")[blaxel.LabelAttempt]
	_, err = p.Create(ctx, sandbox.CreateOptions{ID: "taken"})
	if sandbox.CodeOf(err) != sandbox.AlreadyExists || !strings.Contains(err.Error(), "blaxel") {
		t.Fatalf("second create: %v, want AlreadyExists naming blaxel", err)
	}
	if got := s.Labels("taken")[blaxel.LabelAttempt]; got != label || s.Count("delete") != 0 {
		t.Fatalf("the first sandbox was touched: label %q (want %q), %d deletes", got, label, s.Count("delete"))
	}
	t.Logf("409 for someone else's sandbox: %v; deletes sent: %d", err, s.Count("delete"))
}

// TestCreateCanceledDuringReconcile: a caller that gives up while the
// name is being looked up after an accepted-then-504 create gets an
// error, and the sandbox its attempt made is deleted (it carries the
// attempt's label).
func TestCreateCanceledDuringReconcile(t *testing.T) {
	s := newFake(t)
	ctx, cancel := context.WithCancel(testutil.HangGuard(t))
	calls := 0
	p, _ := newProvider(t, s, blaxel.Options{Sleep: func(c context.Context, _ time.Duration) error {
		calls++
		cancel()
		return context.Canceled
	}})
	s.Inject("create", fakecloud.Fault{Status: http.StatusGatewayTimeout, Accept: true})
	s.Inject("get", fakecloud.Fault{Status: http.StatusNotFound}) // not visible yet on the first look
	_, err := p.Create(ctx, sandbox.CreateOptions{ID: "given-up"})
	if err == nil {
		t.Fatal("create succeeded after the caller gave up")
	}
	if names := s.Names(); len(names) != 0 {
		t.Fatalf("sandboxes left: %v", names)
	}
	t.Logf("canceled during reconcile: %v; deletes %d, sandboxes left 0", err, s.Count("delete"))
}

// TestGoneStatesResumeNotFound: each gone status resumes as NotFound.
func TestGoneStatesResumeNotFound(t *testing.T) {
	s := newFake(t)
	ctx := testutil.HangGuard(t)
	p, _ := newProvider(t, s, blaxel.Options{})
	h, err := p.Create(ctx, sandbox.CreateOptions{ID: "gone-states"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Destroy(context.Background()) })
	for _, st := range blaxel.GoneStatuses {
		s.SetStatus("gone-states", st)
		if _, err := p.Resume(ctx, "gone-states"); sandbox.CodeOf(err) != sandbox.NotFound {
			t.Errorf("%s: resume %v, want NotFound", st, err)
		}
	}
	s.SetStatus("gone-states", "DEPLOYED")
	if _, err := p.Resume(ctx, "gone-states"); err != nil {
		t.Fatalf("DEPLOYED: %v", err)
	}
	if _, err := p.Resume(ctx, "never-made"); sandbox.CodeOf(err) != sandbox.NotFound {
		t.Fatalf("missing: %v", err)
	}
	t.Logf("%d gone statuses resumed as NotFound: %v", len(blaxel.GoneStatuses), blaxel.GoneStatuses)
}

// TestTTL: a sandbox gets ttl 1h by default, the configured one, or none
// with NoTTL; env given at create never reaches the configuration.
func TestTTL(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts blaxel.Options
		want string
	}{
		{"default", blaxel.Options{}, "1h"},
		{"90m", blaxel.Options{TTL: 90 * 60e9}, "90m"},
		{"opt-out", blaxel.Options{NoTTL: true}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newFake(t)
			ctx := testutil.HangGuard(t)
			p, _ := newProvider(t, s, tc.opts)
			h, err := p.Create(ctx, sandbox.CreateOptions{ID: "ttl", Env: map[string]string{"SECRET_VALUE": "s3cr3t-v4lue"}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = h.Destroy(context.Background()) })
			var body struct {
				Spec struct {
					Runtime map[string]any `json:"runtime"`
				} `json:"spec"`
			}
			for _, b := range s.Bodies() {
				if b.Route == "create" {
					if strings.Contains(string(b.Body), "s3cr3t-v4lue") {
						t.Fatal("create env reached the sandbox's configuration")
					}
					_ = json.Unmarshal(b.Body, &body)
				}
			}
			got, _ := body.Spec.Runtime["ttl"].(string)
			if got != tc.want {
				t.Fatalf("ttl %q, want %q", got, tc.want)
			}
			t.Logf("%s: spec.runtime.ttl %q", tc.name, got)
		})
	}
}

// TestSandboxName: names are DNS-safe and at most 49 characters; a key
// that had to change gets a 24-hex digest, so keys never collide.
func TestSandboxName(t *testing.T) {
	seen := map[string]string{}
	for _, tc := range []struct{ key, want string }{
		{"crash", "crash"},
		{"run-42", "run-42"},
		{"Run-42", ""},
		{"run_42", ""},
		{"run.42", ""},
		{"-lead", ""},
		{strings.Repeat("a", 49), strings.Repeat("a", 49)},
		{strings.Repeat("a", 50), ""},
		{"日本語", ""},
	} {
		got := blaxel.SandboxName(tc.key)
		if tc.want != "" && got != tc.want {
			t.Errorf("%q: %q, want %q", tc.key, got, tc.want)
		}
		ok := len(got) <= blaxel.MaxNameLen && !strings.HasPrefix(got, "-") && !strings.HasSuffix(got, "-")
		for _, r := range got {
			ok = ok && (r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-')
		}
		if !ok {
			t.Errorf("%q: %q is not a Blaxel name", tc.key, got)
		}
		if tc.want == "" && !strings.Contains(got, "-") {
			t.Errorf("%q: %q has no digest", tc.key, got)
		}
		if other, dup := seen[got]; dup {
			t.Errorf("%q and %q share %q", tc.key, other, got)
		}
		seen[got] = tc.key
		t.Logf("%q -> %q (%d)", tc.key, got, len(got))
	}
}

// TestPreviewToken: ConnectPort makes a private preview and hands back its
// token in X-Blaxel-Preview-Token; the preview refuses a request without
// it (401) and forwards one with it.
func TestPreviewToken(t *testing.T) {
	s := newFake(t)
	ctx := testutil.HangGuard(t)
	p, _ := newProvider(t, s, blaxel.Options{})
	h, err := p.Create(ctx, sandbox.CreateOptions{ID: "preview"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Destroy(context.Background()) })
	ep, err := h.ConnectPort(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	tok := ep.Headers[blaxel.PreviewTokenHeader]
	if tok == "" || ep.Token != tok {
		t.Fatalf("endpoint %+v: no token header", ep)
	}
	get := func(hdr bool) int {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ep.URL+"/", nil)
		if hdr {
			req.Header.Set(blaxel.PreviewTokenHeader, tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	without, with := get(false), get(true)
	if without != http.StatusUnauthorized || with == http.StatusUnauthorized {
		t.Fatalf("without the token %d, with it %d", without, with)
	}
	again, err := h.ConnectPort(ctx, 1)
	if err != nil || again.URL != ep.URL {
		t.Fatalf("second ConnectPort: %v %+v", err, again)
	}
	t.Logf("private preview: without token %d, with token %d (nothing listens on port 1); previews made %d, tokens %d",
		without, with, s.Count("createPreview"), s.Count("createToken"))
}
