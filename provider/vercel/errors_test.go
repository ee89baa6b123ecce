package vercel_test

import (
	"context"
	"strings"
	"testing"

	"github.com/d10ffeed/corral/internal/fakecloud"
	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/provider/registry"
	"github.com/d10ffeed/corral/provider/vercel"
	"github.com/d10ffeed/corral/sandbox"
)

// TestErrors: a missing token, team or project names its variable (and an
// OIDC token in the environment is not taken instead); 401, 403 (a team
// the token cannot reach), 404 and 429 (after the retries) carry the
// codes, name the backend and never the token.
func TestErrors(t *testing.T) {
	t.Setenv("VERCEL_OIDC_TOKEN", "header.payload.sig")
	for _, tc := range []struct {
		opts vercel.Options
		want string
	}{
		{vercel.Options{TeamID: "t", ProjectID: "p"}, "VERCEL_TOKEN"},
		{vercel.Options{Token: "x", ProjectID: "p"}, "VERCEL_TEAM_ID"},
		{vercel.Options{Token: "x", TeamID: "t"}, "VERCEL_PROJECT_ID"},
	} {
		_, err := vercel.New(tc.opts)
		if err == nil || !strings.Contains(err.Error(), tc.want) || sandbox.CodeOf(err) != sandbox.FailedPrecondition {
			t.Fatalf("New without %s: %v", tc.want, err)
		}
		t.Logf("missing %s: %v", tc.want, err)
	}
	s := newFake(t)
	ctx := testutil.HangGuard(t)
	good, _ := newProvider(t, s, vercel.Options{})
	h, err := good.Create(ctx, sandbox.CreateOptions{ID: "errors-case"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Destroy(context.Background()) })
	const badToken = "vcl-wrong-token-0f0f0f"
	bad, _ := newProvider(t, s, vercel.Options{Token: badToken})
	otherTeam, _ := newProvider(t, s, vercel.Options{TeamID: "team_someone_else"})
	for _, tc := range []struct {
		name  string
		fault *fakecloud.Fault
		p     *vercel.Provider
		id    string
		want  sandbox.Code
		text  string
	}{
		{name: "401 bad token", p: bad, id: h.ID(), want: sandbox.PermissionDenied, text: "401"},
		{name: "403 other team", p: otherTeam, id: h.ID(), want: sandbox.PermissionDenied, text: "Not authorized"},
		{name: "404 unknown sandbox", p: good, id: "no-such-sandbox", want: sandbox.NotFound, text: "Sandbox not found"},
		{name: "429 rate limit", fault: &fakecloud.Fault{Status: 429, RetryAfter: "1", Times: 10}, p: good, id: h.ID(), want: sandbox.ResourceExhausted, text: "Too Many Requests"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.fault != nil {
				s.Inject("get", *tc.fault)
			}
			_, err := tc.p.Resume(ctx, tc.id)
			t.Logf("%s: %v", tc.name, err)
			if sandbox.CodeOf(err) != tc.want || !strings.Contains(err.Error(), "vercel") || !strings.Contains(err.Error(), tc.text) {
				t.Fatalf("got %v (code %v), want code %v naming vercel and %q", err, sandbox.CodeOf(err), tc.want, tc.text)
			}
			if strings.Contains(err.Error(), badToken) || strings.Contains(err.Error(), testToken) {
				t.Fatal("the token is in the error")
			}
		})
	}
}

// TestSecretsStayOutOfConfiguration: CreateOptions.Env and SetEnv reach
// commands (in the command's env field), never the create body (the
// sandbox's persisted configuration) and never the command's argv.
func TestSecretsStayOutOfConfiguration(t *testing.T) {
	s := newFake(t)
	ctx := testutil.HangGuard(t)
	p, _ := newProvider(t, s, vercel.Options{})
	const canary, canary2 = "canary-secret-9d8e7f", "canary-later-1a2b3c"
	h, err := p.Create(ctx, sandbox.CreateOptions{ID: "secrets-case", Env: map[string]string{"CORRAL_CANARY": canary}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Destroy(context.Background()) })
	if err := h.SetEnv(ctx, map[string]string{"CORRAL_CANARY2": canary2}); err != nil {
		t.Fatal(err)
	}
	res, err := h.Exec(ctx, sandbox.Command{Shell: `printf '%s %s' "$CORRAL_CANARY" "$CORRAL_CANARY2"`})
	if err != nil || string(res.Stdout) != canary+" "+canary2 {
		t.Fatalf("the env did not reach the command: %q %v", res.Stdout, err)
	}
	inArgs, inEnv := 0, 0
	for _, b := range s.Bodies() {
		body := string(b.Body)
		if !strings.Contains(body, canary) && !strings.Contains(body, canary2) {
			continue
		}
		if b.Route != "run" {
			t.Errorf("a secret reached %s %s: %s", b.Method, b.Path, body)
			continue
		}
		args := body[strings.Index(body, `"args"`):strings.Index(body, `"env"`)]
		if strings.Contains(args, canary) || strings.Contains(args, canary2) {
			inArgs++
		} else {
			inEnv++
		}
	}
	t.Logf("%d bodies; secrets in command env fields %d, in argv %d, elsewhere 0", len(s.Bodies()), inEnv, inArgs)
	if inArgs > 0 || inEnv == 0 {
		t.Fatalf("secrets in argv %d, in env %d", inArgs, inEnv)
	}
}

// TestListAndPrune: the registry's ls lists corral's sandboxes only (tag
// corral=1), with their keys; prune deletes them.
func TestListAndPrune(t *testing.T) {
	s := newFake(t)
	ctx := testutil.HangGuard(t)
	p, _ := newProvider(t, s, vercel.Options{})
	for _, k := range []string{"key-one", "key/two with space"} {
		if _, err := p.Create(ctx, sandbox.CreateOptions{ID: k}); err != nil {
			t.Fatal(err)
		}
	}
	m := vercel.Managed{Provider: p}
	list, err := m.ListSandboxes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	for _, sb := range list {
		keys[sb.Key] = true
	}
	t.Logf("listed %d: %+v", len(list), keys)
	if len(list) != 2 || !keys["key-one"] || !keys["key/two with space"] {
		t.Fatalf("list: %+v", list)
	}
	rep, err := m.Prune(ctx, registry.PruneOptions{})
	if err != nil || len(rep.Sandboxes) != 2 {
		t.Fatalf("prune: %+v %v", rep, err)
	}
	if n := s.Names(); len(n) != 0 {
		t.Fatalf("left after prune: %v", n)
	}
	if err := m.Ping(ctx); err != nil {
		t.Fatal(err)
	}
}
