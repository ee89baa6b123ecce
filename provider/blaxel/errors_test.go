package blaxel_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/d10ffeed/corral/internal/fakecloud"
	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/provider/blaxel"
	"github.com/d10ffeed/corral/provider/registry"
	"github.com/d10ffeed/corral/sandbox"
)

// TestErrors: a missing key or workspace names its variable; 401 (a bad
// key), 403 (a workspace the key cannot reach), 404 and 429 (after the
// retries) carry the codes, name the backend and never the key.
func TestErrors(t *testing.T) {
	for _, tc := range []struct {
		opts blaxel.Options
		want string
	}{
		{blaxel.Options{Workspace: "w"}, "BL_API_KEY"},
		{blaxel.Options{APIKey: "x"}, "BL_WORKSPACE"},
	} {
		_, err := blaxel.New(tc.opts)
		if err == nil || !strings.Contains(err.Error(), tc.want) || sandbox.CodeOf(err) != sandbox.FailedPrecondition {
			t.Fatalf("New without %s: %v", tc.want, err)
		}
		t.Logf("missing %s: %v", tc.want, err)
	}
	s := newFake(t)
	ctx := testutil.HangGuard(t)
	good, _ := newProvider(t, s, blaxel.Options{})
	h, err := good.Create(ctx, sandbox.CreateOptions{ID: "errors-case"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Destroy(context.Background()) })
	const badKey = "bl-wrong-key-0f0f0f"
	bad, _ := newProvider(t, s, blaxel.Options{APIKey: badKey})
	otherWS, _ := newProvider(t, s, blaxel.Options{Workspace: "someone-else"})
	for _, tc := range []struct {
		name  string
		fault *fakecloud.Fault
		p     *blaxel.Provider
		id    string
		want  sandbox.Code
		text  string
	}{
		{name: "401 bad key", p: bad, id: h.ID(), want: sandbox.PermissionDenied, text: "401"},
		{name: "403 other workspace", p: otherWS, id: h.ID(), want: sandbox.PermissionDenied, text: "403 Forbidden"},
		{name: "404 unknown sandbox", p: good, id: "no-such-sandbox", want: sandbox.NotFound, text: "not found"},
		{name: "429 rate limit", fault: &fakecloud.Fault{Status: 429, RetryAfter: "1", Times: 10}, p: good, id: h.ID(), want: sandbox.ResourceExhausted, text: "Too Many Requests"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.fault != nil {
				s.Inject("get", *tc.fault)
			}
			_, err := tc.p.Resume(ctx, tc.id)
			t.Logf("%s: %v", tc.name, err)
			if sandbox.CodeOf(err) != tc.want || !strings.Contains(err.Error(), "blaxel") || !strings.Contains(err.Error(), tc.text) {
				t.Fatalf("got %v (code %v), want code %v naming blaxel and %q", err, sandbox.CodeOf(err), tc.want, tc.text)
			}
			if strings.Contains(err.Error(), badKey) || strings.Contains(err.Error(), testKey) {
				t.Fatal("the key is in the error")
			}
		})
	}
}

// TestSecretsStayOutOfConfiguration: CreateOptions.Env and SetEnv reach
// commands (in the process request's env field), never the create body
// (the sandbox's configuration) and never the command text.
func TestSecretsStayOutOfConfiguration(t *testing.T) {
	s := newFake(t)
	ctx := testutil.HangGuard(t)
	p, _ := newProvider(t, s, blaxel.Options{})
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
		t.Fatalf("the env did not reach the command: %+v %v", res, err)
	}
	inCmd, inEnv := 0, 0
	for _, b := range s.Bodies() {
		body := string(b.Body)
		if !strings.Contains(body, canary) && !strings.Contains(body, canary2) {
			continue
		}
		if b.Route != "process" {
			t.Errorf("a secret reached %s %s: %s", b.Method, b.Path, body)
			continue
		}
		var req blaxel.ProcessRequest
		_ = json.Unmarshal(b.Body, &req)
		if strings.Contains(req.Command, canary) || strings.Contains(req.Command, canary2) {
			inCmd++
		} else {
			inEnv++
		}
	}
	t.Logf("%d bodies; secrets in process env fields %d, in command text %d, elsewhere 0", len(s.Bodies()), inEnv, inCmd)
	if inCmd > 0 || inEnv == 0 {
		t.Fatalf("secrets in command %d, in env %d", inCmd, inEnv)
	}
}

// TestListAndPrune: the registry's ls lists corral's sandboxes only
// (label corral=1), with their keys; prune deletes them.
func TestListAndPrune(t *testing.T) {
	s := newFake(t)
	ctx := testutil.HangGuard(t)
	p, _ := newProvider(t, s, blaxel.Options{})
	for _, k := range []string{"key-one", "key/two with space"} {
		if _, err := p.Create(ctx, sandbox.CreateOptions{ID: k}); err != nil {
			t.Fatal(err)
		}
	}
	m := blaxel.Managed{Provider: p}
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
