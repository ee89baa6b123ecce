package sbx_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/provider/registry"
	"github.com/d10ffeed/corral/provider/sbx"
	"github.com/d10ffeed/corral/provider/sbx/sbxfake"
	"github.com/d10ffeed/corral/sandbox"
)

// TestErrors: each failure of the CLI is a code that names what is
// missing.
func TestErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, f *fake) *sbx.Provider
		call  func(t *testing.T, p *sbx.Provider) error
		code  sandbox.Code
		words []string
	}{
		{"no sbx on PATH", func(t *testing.T, f *fake) *sbx.Provider {
			t.Setenv("PATH", t.TempDir())
			p, err := sbx.New(sbx.Options{StateDir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			return p
		}, func(t *testing.T, p *sbx.Provider) error {
			_, err := p.Create(testutil.HangGuard(t), sandbox.CreateOptions{ID: "k1"})
			return err
		}, sandbox.FailedPrecondition, []string{`"sbx"`, "not on PATH", "sbx login"}},
		{"ping without sbx", func(t *testing.T, f *fake) *sbx.Provider {
			p, err := sbx.New(sbx.Options{Binary: filepath.Join(t.TempDir(), "sbx"), StateDir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			return p
		}, func(t *testing.T, p *sbx.Provider) error { return sbx.Managed{Provider: p}.Ping(testutil.HangGuard(t)) },
			sandbox.FailedPrecondition, []string{"not on PATH"}},
		{"logged out", func(t *testing.T, f *fake) *sbx.Provider {
			if err := sbxfake.SetLoggedOut(f.state, true); err != nil {
				t.Fatal(err)
			}
			return newProvider(t, f, sbx.Options{})
		}, func(t *testing.T, p *sbx.Provider) error {
			_, err := p.Create(testutil.HangGuard(t), sandbox.CreateOptions{ID: "k2"})
			return err
		}, sandbox.PermissionDenied, []string{"sbx login"}},
		{"resume of a missing sandbox", func(t *testing.T, f *fake) *sbx.Provider { return newProvider(t, f, sbx.Options{}) },
			func(t *testing.T, p *sbx.Provider) error {
				_, err := p.Resume(testutil.HangGuard(t), sbx.SandboxName("nope"))
				return err
			}, sandbox.NotFound, []string{"sbx ls"}},
		{"resume of a foreign name", func(t *testing.T, f *fake) *sbx.Provider { return newProvider(t, f, sbx.Options{}) },
			func(t *testing.T, p *sbx.Provider) error {
				_, err := p.Resume(testutil.HangGuard(t), "../etc")
				return err
			}, sandbox.InvalidArgument, []string{"corral-"}},
		{"deny with an allow list", func(t *testing.T, f *fake) *sbx.Provider {
			return newProvider(t, f, sbx.Options{AllowNetwork: []string{"example.com"}})
		}, func(t *testing.T, p *sbx.Provider) error {
			_, err := p.Create(testutil.HangGuard(t), sandbox.CreateOptions{ID: "k3", Network: sandbox.NetworkDeny})
			return err
		}, sandbox.InvalidArgument, []string{"allowNetwork"}},
		{"bad network rule", func(t *testing.T, f *fake) *sbx.Provider { return nil }, func(t *testing.T, _ *sbx.Provider) error {
			_, err := sbx.New(sbx.Options{AllowNetwork: []string{"a.com,b.com"}})
			return err
		}, sandbox.InvalidArgument, []string{"no commas"}},
		{"exec in a removed sandbox", func(t *testing.T, f *fake) *sbx.Provider { return newProvider(t, f, sbx.Options{}) },
			func(t *testing.T, p *sbx.Provider) error {
				ctx := testutil.HangGuard(t)
				h, err := p.Create(ctx, sandbox.CreateOptions{ID: "k4"})
				if err != nil {
					t.Fatal(err)
				}
				if err := p.Destroy(ctx, h.ID()); err != nil {
					t.Fatal(err)
				}
				_, err = h.Exec(ctx, sandbox.Command{Shell: "true"})
				return err
			}, sandbox.NotFound, []string{"gone"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t)
			p := tc.setup(t, f)
			err := tc.call(t, p)
			if sandbox.CodeOf(err) != tc.code {
				t.Fatalf("code %v, want %v: %v", sandbox.CodeOf(err), tc.code, err)
			}
			for _, w := range tc.words {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			t.Logf("%v: %v", sandbox.CodeOf(err), err)
		})
	}
}

// TestSecretsNotInArgv: create env and SetEnv values reach the command
// (through the env file on a pipe) and no sbx invocation's argv.
func TestSecretsNotInArgv(t *testing.T) {
	const canary = "sbx-canary-5e1f9a7c"
	f := newFake(t)
	p := newProvider(t, f, sbx.Options{})
	ctx := testutil.HangGuard(t)
	h, err := p.Create(ctx, sandbox.CreateOptions{ID: "secret", Env: map[string]string{"TOKEN_A": canary + "-a"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Destroy(testutil.HangGuard(t), h.ID()) })
	if err := h.SetEnv(ctx, map[string]string{"TOKEN_B": canary + "-b ="}); err != nil {
		t.Fatal(err)
	}
	res, err := h.Exec(ctx, sandbox.Command{Shell: `printf '%s|%s' "$TOKEN_A" "$TOKEN_B"`, Env: map[string]string{"TOKEN_C": canary}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(res.Stdout), canary+"-a|"+canary+"-b ="; got != want {
		t.Fatalf("stdout %q, want %q", got, want)
	}
	calls, err := sbxfake.Calls(f.state)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range calls {
		if strings.Contains(strings.Join(c, " "), canary) {
			t.Fatalf("a secret reached sbx's argv: %q", c)
		}
	}
	if _, err := h.Exec(ctx, sandbox.Command{Shell: "true", Env: map[string]string{"NL": "a\nb"}}); sandbox.CodeOf(err) != sandbox.InvalidArgument {
		t.Fatalf("a value with a line break: %v, want InvalidArgument", err)
	}
	t.Logf("%d sbx invocations, none with the canary in argv", len(calls))
}

// TestNetworkPolicy: deny is a per-sandbox deny of "**"; the allow and
// deny lists are one comma-separated RESOURCES argument each, added
// before the sandbox first runs.
func TestNetworkPolicy(t *testing.T) {
	f := newFake(t)
	ctx := testutil.HangGuard(t)
	p := newProvider(t, f, sbx.Options{AllowNetwork: []string{"api.anthropic.com", "*.npmjs.org"}, DenyNetwork: []string{"ads.example.com"}})
	rec := createRecorded(t, f, p, sandbox.CreateOptions{ID: "net"})
	got := []string{}
	for _, r := range rec.Policies {
		got = append(got, r.Decision+" "+strings.Join(r.Resources, ","))
	}
	if want := "allow api.anthropic.com,*.npmjs.org|deny ads.example.com"; strings.Join(got, "|") != want || rec.Status != "stopped" {
		t.Fatalf("rules %q (status %s), want %q before the first start", got, rec.Status, want)
	}
	p2 := newProvider(t, f, sbx.Options{})
	h2, err := p2.Create(ctx, sandbox.CreateOptions{ID: "deny", Network: sandbox.NetworkDeny})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p2.Destroy(testutil.HangGuard(t), h2.ID()) })
	rec2, _ := sbxfake.Lookup(f.state, h2.ID())
	if len(rec2.Policies) != 1 || rec2.Policies[0].Decision != "deny" || rec2.Policies[0].Resources[0] != "**" {
		t.Fatalf("deny rules %+v", rec2.Policies)
	}
	t.Logf("rules: %q; deny: %+v", got, rec2.Policies)
}

// TestManage: ls and prune see corral's sandboxes only (a banner before
// the JSON is skipped), and prune removes them.
func TestManage(t *testing.T) {
	f := newFake(t)
	ctx := testutil.HangGuard(t)
	p := newProvider(t, f, sbx.Options{})
	m := sbx.Managed{Provider: p}
	for _, k := range []string{"a", "b"} {
		if _, err := p.Create(ctx, sandbox.CreateOptions{ID: k}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p.Create(ctx, sandbox.CreateOptions{ID: "c"}); err != nil {
		t.Fatal(err)
	}
	if err := sbxfake.SetBanner(f.state, true); err != nil {
		t.Fatal(err)
	}
	list, err := m.ListSandboxes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 3 || list[0].Key != "c" {
		t.Fatalf("list %+v", list)
	}
	rep, err := m.Prune(ctx, registry.PruneOptions{})
	if err != nil {
		t.Fatal(err)
	}
	left, _ := m.ListSandboxes(ctx)
	if len(rep.Sandboxes) != 3 || len(left) != 0 {
		t.Fatalf("pruned %v, left %v", rep.Sandboxes, left)
	}
	if err := m.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("listed %d, pruned %d, left %d", len(list), len(rep.Sandboxes), len(left))
}
