package railway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/provider/railway"
	"github.com/d10ffeed/corral/provider/railway/railwayfake"
	"github.com/d10ffeed/corral/provider/registry"
	"github.com/d10ffeed/corral/sandbox"
)

// foreignCreate makes a sandbox the way another client of the
// environment would (no corral variables), by a raw GraphQL call.
func foreignCreate(t *testing.T, f *railwayfake.Fake) string {
	t.Helper()
	body, _ := json.Marshal(map[string]any{
		"query":     "mutation RailwaySandboxCreate($input: SandboxCreateInput!) {\n  sandboxCreate(input: $input) {\n    id\n  }\n}",
		"variables": map[string]any{"input": map[string]any{"environmentId": f.EnvironmentID(), "variables": map[string]string{"APP": "theirs"}}},
	})
	req, _ := http.NewRequest(http.MethodPost, f.GraphQLURL(), bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var ans struct {
		Data struct {
			SandboxCreate struct {
				ID string `json:"id"`
			} `json:"sandboxCreate"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&ans); err != nil || ans.Data.SandboxCreate.ID == "" {
		t.Fatalf("foreign create: %v %+v", err, ans)
	}
	return ans.Data.SandboxCreate.ID
}

// TestManage: the listing shows corral's sandboxes with their keys and
// never another client's; prune by age destroys only corral's old
// sandboxes and deletes only corral's old checkpoints; a dry run removes
// nothing.
func TestManage(t *testing.T) {
	var offset atomic.Int64 // the fake's clock runs ahead by this much
	f, err := railwayfake.New(railwayfake.Options{Token: testToken, Now: func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	ctx := testutil.HangGuard(t)
	p, _ := newProvider(t, f, railway.Options{})
	m := railway.Managed{Provider: p}

	offset.Store(int64(-2 * time.Hour)) // made two hours ago
	old, err := p.Create(ctx, sandbox.CreateOptions{ID: "old-key"})
	if err != nil {
		t.Fatal(err)
	}
	oldSnap, err := old.Snapshot(ctx, "old")
	if err != nil {
		t.Fatal(err)
	}
	offset.Store(0)
	fresh, err := p.Create(ctx, sandbox.CreateOptions{ID: "fresh-key"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fresh.Destroy(context.Background()) })
	freshSnap, err := fresh.Snapshot(ctx, "fresh")
	if err != nil {
		t.Fatal(err)
	}
	foreign := foreignCreate(t, f)
	if err := m.Ping(ctx); err != nil {
		t.Fatal(err)
	}

	list, err := m.ListSandboxes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, s := range list {
		if s.ID == foreign {
			t.Fatalf("the listing shows another client's sandbox %s", foreign)
		}
		keys = append(keys, s.Key)
	}
	if !slices.Equal(keys, []string{"fresh-key", "old-key"}) {
		t.Fatalf("listed keys %v, want [fresh-key old-key] (newest first)", keys)
	}
	snaps, err := m.ListSnapshots(ctx)
	if err != nil || len(snaps) != 2 || snaps[0].ID != freshSnap.ID || snaps[1].ID != oldSnap.ID {
		t.Fatalf("snapshots %v %+v, want [%s %s]", err, snaps, freshSnap.ID, oldSnap.ID)
	}

	dry, err := m.Prune(ctx, registry.PruneOptions{OlderThan: time.Hour, DryRun: true})
	if err != nil || !slices.Equal(dry.Sandboxes, []string{old.ID()}) || !slices.Equal(dry.Snapshots, []string{oldSnap.ID}) {
		t.Fatalf("dry run: %v %+v", err, dry)
	}
	if f.Live() != 3 || len(f.Checkpoints()) != 2 {
		t.Fatalf("the dry run removed something: %d sandboxes, checkpoints %v", f.Live(), f.Checkpoints())
	}
	rep, err := m.Prune(ctx, registry.PruneOptions{OlderThan: time.Hour})
	if err != nil || !slices.Equal(rep.Sandboxes, []string{old.ID()}) || !slices.Equal(rep.Snapshots, []string{oldSnap.ID}) {
		t.Fatalf("prune: %v %+v", err, rep)
	}
	if _, err := p.Resume(ctx, old.ID()); sandbox.CodeOf(err) != sandbox.NotFound {
		t.Fatalf("the pruned sandbox resumes: %v", err)
	}
	if _, err := p.Resume(ctx, foreign); err != nil {
		t.Fatalf("prune touched another client's sandbox: %v", err)
	}
	if cps := f.Checkpoints(); !slices.Equal(cps, []string{freshSnap.ID}) {
		t.Fatalf("checkpoints after prune %v, want [%s]", cps, freshSnap.ID)
	}
	t.Logf("listed %d of 3 sandboxes (1 foreign left out); prune --older-than 1h: sandboxes %v, checkpoints %v; GraphQL calls %d, exec sockets %d",
		len(list), rep.Sandboxes, rep.Snapshots, f.Count("graphql"), f.Count("exec"))
}

// TestListPages: the listing follows the connection's pages (the fake
// serves at most 100 a page).
func TestListPages(t *testing.T) {
	f := newFake(t)
	ctx := testutil.HangGuard(t)
	for range 101 {
		foreignCreate(t, f)
	}
	p, _ := newProvider(t, f, railway.Options{})
	h, err := p.Create(ctx, sandbox.CreateOptions{ID: "last"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Destroy(context.Background()) })
	before := f.Count("graphql")
	list, err := p.List(ctx)
	if err != nil || len(list) != 1 || list[0].Key != "last" {
		t.Fatalf("list: %v %+v", err, list)
	}
	t.Logf("102 sandboxes, 1 corral's: %d GraphQL calls (2 pages + one shell token per sandbox)", f.Count("graphql")-before)
}

// TestSection: the corral.yaml section finds the token as the SDK does
// (RAILWAY_TOKEN, a project token, before RAILWAY_API_TOKEN), names the
// missing variables, and refuses network none with the reason.
func TestSection(t *testing.T) {
	f := newFake(t)
	ctx := testutil.HangGuard(t)
	for _, k := range []string{railway.EnvProjectToken, railway.EnvAPIToken, railway.EnvEnvironment, railway.EnvEndpoint, railway.EnvExecEndpoint} {
		t.Setenv(k, "")
	}
	build := func(section string) (sandbox.Provider, error) {
		t.Helper()
		var doc struct {
			Provider struct {
				Railway yaml.Node `yaml:"railway"`
			} `yaml:"provider"`
		}
		if err := yaml.Unmarshal([]byte("provider:\n  railway: "+section+"\n"), &doc); err != nil {
			t.Fatal(err)
		}
		e, ok := registry.Lookup(railway.Name)
		if !ok {
			t.Fatal("railway is not registered")
		}
		cfg, err := e.Section(&doc.Provider.Railway)
		if err != nil {
			return nil, err
		}
		return cfg.Provider(registry.BuildOptions{})
	}
	for _, tc := range []struct{ name, yaml, want string }{
		{"no token", "{environmentId: e}", "RAILWAY_API_TOKEN"},
		{"tokenEnv unset", "{tokenEnv: MY_RW_TOKEN, environmentId: e}", "MY_RW_TOKEN"},
		{"network none", "{network: none}", "public egress"},
		{"bad network", "{network: open}", "isolated"},
		{"bad authType", "{tokenEnv: HOME, authType: basic}", "project-token"},
		{"unknown key", "{enviromentId: e}", "enviromentId"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := build(tc.yaml)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error naming %q", err, tc.want)
			}
			t.Logf("%s: %v", tc.name, err)
		})
	}
	t.Setenv(railway.EnvEnvironment, f.EnvironmentID())
	t.Setenv(railway.EnvEndpoint, f.GraphQLURL())
	t.Setenv(railway.EnvExecEndpoint, f.ExecWSURL())
	t.Setenv(railway.EnvAPIToken, "not-the-token")
	t.Setenv(railway.EnvProjectToken, testToken) // the SDK's order: the project token wins
	p, err := build(`{workdir: "~/workspace", idleTimeoutMinutes: 0}`)
	if err != nil {
		t.Fatal(err)
	}
	h, err := p.Create(ctx, sandbox.CreateOptions{ID: "from-yaml"})
	if err != nil {
		t.Fatalf("create with RAILWAY_TOKEN as a project token: %v", err)
	}
	t.Cleanup(func() { _ = h.Destroy(context.Background()) })
	if _, ok := p.(registry.Lister); !ok {
		t.Fatal("the section's provider has no listing")
	}
}

// TestFlags: the CLI flags are refused with the flag's name: --network
// none (Railway keeps public egress) and an --idle-timeout that is not
// minutes.
func TestFlags(t *testing.T) {
	t.Setenv(railway.EnvAPIToken, testToken)
	t.Setenv(railway.EnvEnvironment, "env-fake")
	for _, tc := range []struct {
		v    registry.Values
		want string
	}{
		{registry.Values{"network": "none"}, "--network: railway cannot deny the network"},
		{registry.Values{"idle-timeout": "soon"}, "--idle-timeout: want minutes"},
		{registry.Values{"network": "open"}, `"isolated" or "private"`},
	} {
		_, err := registry.Open(railway.Name, tc.v, registry.OpenOptions{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: got %v, want %q", tc.v, err, tc.want)
		}
		t.Logf("%v: %v", tc.v, err)
	}
	if _, err := registry.Open(railway.Name, registry.Values{"network": "private", "idle-timeout": "0", "region": "us-west2"}, registry.OpenOptions{}); err != nil {
		t.Fatalf("valid flags: %v", err)
	}
}
