package sprites_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/d10ffeed/corral/internal/fakecloud"
	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/provider/sprites"
	"github.com/d10ffeed/corral/sandbox"
)

// TestErrors: a missing key names SPRITES_API_KEY; 401, 403, 404 and 429
// (after the retries) carry the codes, name the backend and its message,
// and never the key.
func TestErrors(t *testing.T) {
	if _, err := sprites.New(sprites.Options{}); err == nil || !strings.Contains(err.Error(), "SPRITES_API_KEY") {
		t.Fatalf("New without a key: %v", err)
	} else {
		t.Logf("missing key: %v", err)
	}
	s := newFake(t)
	ctx := testutil.HangGuard(t)
	good, _ := newProvider(t, s, sprites.Options{})
	h, err := good.Create(ctx, sandbox.CreateOptions{ID: "errors-case"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Destroy(context.Background()) })
	const badKey = "corral-org/1/tok-wrong/secret-0f0f0f"
	bad, _ := newProvider(t, s, sprites.Options{APIKey: badKey})
	for _, tc := range []struct {
		name  string
		fault *fakecloud.Fault
		p     *sprites.Provider
		id    string
		want  sandbox.Code
		text  string
	}{
		{name: "401 bad key", p: bad, id: h.ID(), want: sandbox.PermissionDenied, text: "401"},
		{name: "403", fault: &fakecloud.Fault{Status: 403}, p: good, id: h.ID(), want: sandbox.PermissionDenied, text: "403"},
		{name: "404 unknown sprite", p: good, id: "no-such-sprite", want: sandbox.NotFound, text: "not found"},
		{name: "429 rate limit", fault: &fakecloud.Fault{Status: 429, RetryAfter: "1", Times: 10}, p: good, id: h.ID(), want: sandbox.ResourceExhausted, text: "Too Many Requests"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.fault != nil {
				s.Inject("get", *tc.fault)
			}
			_, err := tc.p.Resume(ctx, tc.id)
			t.Logf("%s: %v", tc.name, err)
			if sandbox.CodeOf(err) != tc.want || !strings.Contains(err.Error(), "sprites") || !strings.Contains(err.Error(), tc.text) {
				t.Fatalf("got %v (code %v), want code %v naming sprites and %q", err, sandbox.CodeOf(err), tc.want, tc.text)
			}
			for _, secret := range []string{badKey, testKey, "secret-"} {
				if strings.Contains(err.Error(), secret) {
					t.Fatal("the API key is in the error")
				}
			}
		})
	}
	// Exec over the WebSocket with a bad key: the upgrade is refused 401.
	badH, err := bad.Resume(ctx, h.ID())
	if err == nil {
		_ = badH
		t.Fatal("resume with a bad key succeeded")
	}
	// A name that is taken is AlreadyExists, never a second Sprite.
	if _, err := good.Create(ctx, sandbox.CreateOptions{ID: "errors-case"}); sandbox.CodeOf(err) != sandbox.AlreadyExists {
		t.Fatalf("create of a taken name: %v", err)
	} else {
		t.Logf("taken name: %v", err)
	}
	// No restore into a new sandbox: Unsupported, with the reason.
	_, err = good.RestoreSnapshot(ctx, "v1", sandbox.CreateOptions{})
	var ue *sandbox.UnsupportedCapabilityError
	if !errors.As(err, &ue) || sandbox.CodeOf(err) != sandbox.Unimplemented || !strings.Contains(err.Error(), "in place") {
		t.Fatalf("RestoreSnapshot: %v", err)
	}
	t.Logf("RestoreSnapshot: %v", err)
}

// TestEnvReplacesDefault: Sprites' env= replaces the default environment;
// the provider lays the overlay over the Sprite's own (read at open), so a
// command with an overlay keeps PATH and HOME, and the overlay reaches it.
func TestEnvReplacesDefault(t *testing.T) {
	s := newFake(t)
	ctx := testutil.HangGuard(t)
	p, _ := newProvider(t, s, sprites.Options{})
	h, err := p.Create(ctx, sandbox.CreateOptions{Env: map[string]string{"CORRAL_CANARY": "canary-9d8e7f"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Destroy(context.Background()) })
	res, err := h.Exec(ctx, sandbox.Command{Shell: `printf '%s|%s|%s' "$CORRAL_CANARY" "$HOME" "$PATH"`, Env: map[string]string{"EXTRA": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(string(res.Stdout), "|")
	t.Logf("with an overlay: exit %d, canary %q, HOME %q, PATH %q", res.ExitCode, parts[0], parts[1], parts[2])
	if res.ExitCode != 0 || parts[0] != "canary-9d8e7f" || parts[1] == "" || !strings.Contains(parts[2], "/bin") {
		t.Fatalf("the overlay lost the default environment: %q (stderr %s)", res.Stdout, res.Stderr)
	}
	for _, b := range s.Bodies() {
		if strings.Contains(string(b.Body), "canary-9d8e7f") {
			t.Fatalf("the secret reached a REST body (%s %s)", b.Method, b.Path)
		}
	}
}
