package daytona_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/d10ffeed/corral/internal/fakecloud"
	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/provider/daytona"
	"github.com/d10ffeed/corral/provider/registry"
	"github.com/d10ffeed/corral/sandbox"
)

// TestErrors: a missing key names DAYTONA_API_KEY; 401, 403, 404 and 429
// (after the retries) carry the codes, name the backend, and never the key.
func TestErrors(t *testing.T) {
	if _, err := daytona.New(daytona.Options{}); err == nil || !strings.Contains(err.Error(), "DAYTONA_API_KEY") {
		t.Fatalf("New without a key: %v", err)
	} else {
		t.Logf("missing key: %v", err)
	}
	s := newFake(t)
	ctx := testutil.HangGuard(t)
	good, _ := newProvider(t, s, daytona.Options{})
	h, err := good.Create(ctx, sandbox.CreateOptions{ID: "errors-case"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Destroy(context.Background()) })
	const badKey = "dtn-wrong-key-0f0f0f"
	bad, _ := newProvider(t, s, daytona.Options{APIKey: badKey})
	for _, tc := range []struct {
		name  string
		fault *fakecloud.Fault
		p     *daytona.Provider
		id    string
		want  sandbox.Code
		text  string
	}{
		{name: "401 bad key", p: bad, id: h.ID(), want: sandbox.PermissionDenied, text: "401"},
		{name: "403", fault: &fakecloud.Fault{Status: 403}, p: good, id: h.ID(), want: sandbox.PermissionDenied, text: "403"},
		{name: "404 unknown sandbox", p: good, id: "no-such-sandbox", want: sandbox.NotFound, text: "not found"},
		{name: "429 quota", fault: &fakecloud.Fault{Status: 429, RetryAfter: "1", Times: 10}, p: good, id: h.ID(), want: sandbox.ResourceExhausted, text: "Too Many Requests"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.fault != nil {
				s.Inject("get", *tc.fault)
			}
			_, err := tc.p.Resume(ctx, tc.id)
			t.Logf("%s: %v", tc.name, err)
			if sandbox.CodeOf(err) != tc.want || !strings.Contains(err.Error(), "daytona") || !strings.Contains(err.Error(), tc.text) {
				t.Fatalf("got %v (code %v), want code %v naming daytona and %q", err, sandbox.CodeOf(err), tc.want, tc.text)
			}
			if strings.Contains(err.Error(), badKey) || strings.Contains(err.Error(), testKey) {
				t.Fatal("the API key is in the error")
			}
		})
	}
}

// TestSecretsStayOutOfConfiguration: CreateOptions.Env and SetEnv reach
// commands, never a REST body (create's env stays empty) and never a file
// left in the sandbox.
func TestSecretsStayOutOfConfiguration(t *testing.T) {
	s := newFake(t)
	ctx := testutil.HangGuard(t)
	p, _ := newProvider(t, s, daytona.Options{})
	const canary = "canary-secret-9d8e7f"
	h, err := p.Create(ctx, sandbox.CreateOptions{Env: map[string]string{"CORRAL_CANARY": canary}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Destroy(context.Background()) })
	if err := h.SetEnv(ctx, map[string]string{"CORRAL_CANARY2": canary + "-2"}); err != nil {
		t.Fatal(err)
	}
	res, err := h.Exec(ctx, sandbox.Command{Shell: `printf '%s %s' "$CORRAL_CANARY" "$CORRAL_CANARY2"`})
	if err != nil || string(res.Stdout) != canary+" "+canary+"-2" {
		t.Fatalf("env in the command: %q %v", res.Stdout, err)
	}
	// A SetEnv makes later commands take a fresh session (the old one's
	// shell holds the old values).
	sessions := s.Count("sessionCreate")
	if err := h.SetEnv(ctx, map[string]string{"CORRAL_CANARY2": canary + "-3"}); err != nil {
		t.Fatal(err)
	}
	res, err = h.Exec(ctx, sandbox.Command{Shell: `printf '%s' "$CORRAL_CANARY2"`})
	if err != nil || string(res.Stdout) != canary+"-3" {
		t.Fatalf("env after SetEnv: %q %v", res.Stdout, err)
	}
	t.Logf("sessions made for the command after SetEnv: %d", s.Count("sessionCreate")-sessions)
	var inBodies, files int
	for _, b := range s.Bodies() {
		if strings.Contains(string(b.Body), canary) && b.Route != "upload" {
			inBodies++
		}
	}
	dir := s.Sandboxes("", nil)[0].Dir
	_ = filepath.Walk(dir, func(path string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			if b, _ := os.ReadFile(path); strings.Contains(string(b), canary) {
				files++
				t.Logf("canary left in %s", path)
			}
		}
		return nil
	})
	env := s.SandboxEnv(h.ID())
	t.Logf("canary: in %d REST bodies other than the env upload, in %d files left in the sandbox, create env %v", inBodies, files, env)
	if inBodies != 0 || files != 0 || len(env) != 0 {
		t.Fatal("a secret reached configuration or stayed on disk")
	}
}

// TestKillReachesGrandchild is Daytona's kill case: a session command is
// not the leader of a process group (the daemon sources it in the
// session's shell), so a kill of "its group" without setsid — what a
// client that only stops polling, or signals the one pid, gets — leaves a
// backgrounded grandchild writing; the provider's commands run setsid'd
// and its group kill stops the heartbeat and leaves nothing.
func TestKillReachesGrandchild(t *testing.T) {
	s := newFake(t)
	ctx := testutil.HangGuard(t)
	p, _ := newProvider(t, s, daytona.Options{KillGrace: 200 * time.Millisecond})
	h, err := p.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Destroy(context.Background()) })
	root := h.WorkspaceRoot()
	beat := func(name string) int {
		b, _ := os.ReadFile(filepath.Join(root, name))
		return len(b)
	}
	frozen := func(name string) bool {
		a := beat(name)
		time.Sleep(600 * time.Millisecond) // a quiet window, only to see the heartbeat stop
		return beat(name) == a
	}
	// The provider's Spawn and Kill.
	pr, err := h.Spawn(ctx, sandbox.Command{Shell: `(while :; do echo . >> hb1; sleep 0.05; done) & wait`})
	if err != nil {
		t.Fatal(err)
	}
	for beat("hb1") < 2 {
		time.Sleep(20 * time.Millisecond)
	}
	if err := pr.Kill(ctx, 0); err != nil {
		t.Fatal(err)
	}
	code, _ := pr.Wait(ctx)
	stopped := frozen("hb1")
	t.Logf("provider kill: exit %d, heartbeat stopped %v (%d bytes)", code, stopped, beat("hb1"))
	if !stopped {
		t.Fatal("the provider's kill left the grandchild running")
	}
	// The same tree started without setsid: its pid is not a group leader.
	res, err := h.Exec(ctx, sandbox.Command{Shell: `sh -c 'echo $$ > pid2; (while :; do echo . >> hb2; sleep 0.05; done) & wait' >/dev/null 2>&1 &
for i in $(seq 100); do [ -s pid2 ] && break; sleep 0.05; done; cat pid2`})
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(res.Stdout)))
	for beat("hb2") < 2 {
		time.Sleep(20 * time.Millisecond)
	}
	res, _ = h.Exec(ctx, sandbox.Command{Args: []string{"sh", "-c", `kill -9 -"$1" 2>/dev/null && echo group || { kill -9 "$1"; echo pid; }`, "sh", strconv.Itoa(pid)}})
	survived := !frozen("hb2")
	t.Logf("kill without a group of its own: reached the %s only, grandchild survived %v", strings.TrimSpace(string(res.Stdout)), survived)
	_, _ = h.Exec(ctx, sandbox.Command{Shell: `pkill -9 -f 'echo . >> hb2' 2>/dev/null; true`})
	if !survived {
		t.Log("note: the pid led a group after all (the fake's shell differs)")
	}
}

// TestListAndPrune: the registry's management view lists only corral's
// sandboxes (by label) and prunes by age.
func TestListAndPrune(t *testing.T) {
	s := newFake(t)
	ctx := testutil.HangGuard(t)
	p, _ := newProvider(t, s, daytona.Options{})
	m := daytona.Managed{Provider: p}
	for _, k := range []string{"key-a", "key-b"} {
		if _, err := p.Create(ctx, sandbox.CreateOptions{ID: k}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.CreateSandbox("not-corral", map[string]string{"team": "x"}); err != nil {
		t.Fatal(err)
	}
	list, err := m.ListSandboxes(ctx)
	if err != nil || len(list) != 2 || list[0].Key != "key-b" {
		t.Fatalf("list: %+v %v", list, err)
	}
	rep, err := m.Prune(ctx, registry.PruneOptions{OlderThan: time.Hour})
	if err != nil || len(rep.Sandboxes) != 0 {
		t.Fatalf("prune of young sandboxes: %+v %v", rep, err)
	}
	rep, err = m.Prune(ctx, registry.PruneOptions{})
	t.Logf("listed %d of corral's sandboxes (of 3 on the fake); prune older than 1h removed 0, prune all removed %d", len(list), len(rep.Sandboxes))
	if err != nil || len(rep.Sandboxes) != 2 || len(s.Sandboxes("", nil)) != 1 {
		t.Fatalf("prune: %+v %v, %d left", rep, err, len(s.Sandboxes("", nil)))
	}
}
