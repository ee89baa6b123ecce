package cloudflare_test

import (
	"context"
	"strings"
	"testing"

	"github.com/d10ffeed/corral/internal/fakecloud"
	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/provider/cloudflare"
	"github.com/d10ffeed/corral/provider/registry"
	"github.com/d10ffeed/corral/sandbox"
)

// TestErrors: a missing URL or token names what is missing (the variable
// and the bridge secret); 401, 404 and 429 (after the retries) carry the
// codes, name the backend and never the token.
func TestErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		sec  cloudflare.Section
		env  map[string]string
		want []string
	}{
		{"no url", cloudflare.Section{}, map[string]string{cloudflare.EnvToken: "x"}, []string{cloudflare.EnvURL, "wrangler deploy"}},
		{"no token", cloudflare.Section{URL: "https://b.example"}, nil, []string{cloudflare.EnvToken, "BRIDGE_TOKEN"}},
		{"no token in tokenEnv", cloudflare.Section{URL: "https://b.example", TokenEnv: "MY_CF_TOKEN"}, map[string]string{cloudflare.EnvToken: "x"}, []string{"MY_CF_TOKEN"}},
		{"url from the environment, no token", cloudflare.Section{}, map[string]string{cloudflare.EnvURL: "https://b.example"}, []string{cloudflare.EnvToken}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(cloudflare.EnvURL, "")
			t.Setenv(cloudflare.EnvToken, "")
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			_, err := tc.sec.Provider(registry.BuildOptions{})
			t.Logf("%s: %v", tc.name, err)
			if sandbox.CodeOf(err) != sandbox.FailedPrecondition {
				t.Fatalf("code %v, want FailedPrecondition", sandbox.CodeOf(err))
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("%v does not name %q", err, w)
				}
			}
		})
	}
	s := newFake(t)
	ctx := testutil.HangGuard(t)
	good, _ := newProvider(t, s, cloudflare.Options{})
	h, err := good.Create(ctx, sandbox.CreateOptions{ID: "errors-case"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Destroy(context.Background()) })
	const badToken = "cf-wrong-token-0e0e0e"
	bad, _ := newProvider(t, s, cloudflare.Options{Token: badToken})
	for _, tc := range []struct {
		name  string
		fault *fakecloud.Fault
		p     *cloudflare.Provider
		id    string
		want  sandbox.Code
		text  string
	}{
		{name: "401 bad token", p: bad, id: h.ID(), want: sandbox.PermissionDenied, text: "401"},
		{name: "404 unknown sandbox", p: good, id: "no-such-sandbox", want: sandbox.NotFound, text: "not found"},
		{name: "403 forbidden", fault: &fakecloud.Fault{Status: 403}, p: good, id: h.ID(), want: sandbox.PermissionDenied, text: "403"},
		{name: "429 rate limit", fault: &fakecloud.Fault{Status: 429, RetryAfter: "1", Times: 10}, p: good, id: h.ID(), want: sandbox.ResourceExhausted, text: "429"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.fault != nil {
				s.Inject("get", *tc.fault)
			}
			_, err := tc.p.Resume(ctx, tc.id)
			t.Logf("%s: %v", tc.name, err)
			if sandbox.CodeOf(err) != tc.want || !strings.Contains(err.Error(), "cloudflare") || !strings.Contains(err.Error(), tc.text) {
				t.Fatalf("got %v (code %v), want code %v naming cloudflare and %q", err, sandbox.CodeOf(err), tc.want, tc.text)
			}
			if strings.Contains(err.Error(), badToken) || strings.Contains(err.Error(), testToken) {
				t.Fatal("the token is in the error")
			}
		})
	}
}

// TestSecretsStayOutOfConfiguration: CreateOptions.Env reaches commands
// and never the create body; SetEnv reaches commands and the sandbox's
// own environment (setEnvVars), never a create body or argv.
func TestSecretsStayOutOfConfiguration(t *testing.T) {
	s := newFake(t)
	ctx := testutil.HangGuard(t)
	p, _ := newProvider(t, s, cloudflare.Options{})
	const createSecret, setSecret = "canary-create-5d1f", "canary-setenv-8e2a"
	h, err := p.Create(ctx, sandbox.CreateOptions{ID: "secrets", Env: map[string]string{"CREATE_SECRET": createSecret}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Destroy(context.Background()) })
	if err := h.SetEnv(ctx, map[string]string{"SET_SECRET": setSecret}); err != nil {
		t.Fatal(err)
	}
	res, err := h.Exec(ctx, sandbox.Command{Shell: `printf '%s %s' "$CREATE_SECRET" "$SET_SECRET"; ps -o args= -p $$ 2>/dev/null || true`})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(res.Stdout), createSecret+" "+setSecret) {
		t.Fatalf("the command saw %q", res.Stdout)
	}
	if got := s.SandboxEnv(h.ID())["SET_SECRET"]; got != setSecret {
		t.Fatalf("setEnvVars got %q", got)
	}
	creates := 0
	for _, b := range s.Bodies() {
		if b.Route == "create" {
			creates++
			if strings.Contains(string(b.Body), createSecret) || strings.Contains(string(b.Body), setSecret) {
				t.Fatalf("a secret reached the create body: %s", b.Body)
			}
		}
	}
	t.Logf("%d create bodies checked; both secrets reached the command, the SetEnv one the sandbox's setEnvVars", creates)
}

// TestSandboxID: keys that are not DNS-safe or are too long get a cleaned
// prefix and a digest (distinct keys, distinct ids), and the key rides in
// a label for the listing.
func TestSandboxID(t *testing.T) {
	for _, tc := range []struct{ key, want string }{
		{"plain-key-1", "plain-key-1"},
		{"Upper/Case key", ""},
		{strings.Repeat("a", 64), ""},
		{"$()", ""},
	} {
		got := cloudflare.SandboxID(tc.key)
		if tc.want != "" && got != tc.want {
			t.Fatalf("SandboxID(%q) = %q, want %q", tc.key, got, tc.want)
		}
		if cloudflare.SandboxID(got) != got || len(got) > 63 {
			t.Fatalf("SandboxID(%q) = %q is not itself a valid id", tc.key, got)
		}
		t.Logf("%q → %q", tc.key, got)
	}
	if cloudflare.SandboxID("A") == cloudflare.SandboxID("a-") {
		t.Fatal("distinct keys share an id")
	}
	s := newFake(t)
	ctx := testutil.HangGuard(t)
	p, _ := newProvider(t, s, cloudflare.Options{})
	h, err := p.Create(ctx, sandbox.CreateOptions{ID: "Run/Key 7"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Destroy(context.Background()) })
	list, err := cloudflare.Managed{Provider: p}.ListSandboxes(ctx)
	if err != nil || len(list) != 1 || list[0].Key != "Run/Key 7" || list[0].ID != h.ID() {
		t.Fatalf("list %+v, %v", list, err)
	}
	if _, err := p.Resume(ctx, h.ID()); err != nil {
		t.Fatal(err)
	}
}
