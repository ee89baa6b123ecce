package ensure_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/d10ffeed/corral/provider/local"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/sandbox/ensure"
	"github.com/d10ffeed/corral/store"
	"github.com/d10ffeed/corral/store/memstore"
)

// counting wraps the local provider, counts calls, and adds snapshots
// (a copy of the directory) so the restore path can be tested without a
// container engine.
type counting struct {
	*local.Provider
	snapDir                              string
	baseDir                              string
	creates, resumes, restores, destroys atomic.Int32
	resumeErr                            error
}

func (c *counting) Capabilities() sandbox.Capabilities {
	caps := c.Provider.Capabilities()
	caps.Snapshots = c.snapDir != ""
	return caps
}

func (c *counting) Create(ctx context.Context, o sandbox.CreateOptions) (sandbox.Handle, error) {
	c.creates.Add(1)
	h, err := c.Provider.Create(ctx, o)
	if err != nil {
		return nil, err
	}
	return &snapHandle{Handle: h, c: c}, nil
}

func (c *counting) Resume(ctx context.Context, id string) (sandbox.Handle, error) {
	c.resumes.Add(1)
	if c.resumeErr != nil {
		return nil, c.resumeErr
	}
	h, err := c.Provider.Resume(ctx, id)
	if err != nil {
		return nil, err
	}
	return &snapHandle{Handle: h, c: c}, nil
}

func (c *counting) RestoreSnapshot(ctx context.Context, snap string, o sandbox.CreateOptions) (sandbox.Handle, error) {
	if c.snapDir == "" {
		return nil, sandbox.Unsupported("counting", "snapshots")
	}
	c.restores.Add(1)
	if _, err := os.Stat(snap); err != nil {
		return nil, sandbox.Errorf(sandbox.NotFound, "restore", snap, "no such snapshot")
	}
	o.ID, o.SourceDir = "", snap
	h, err := c.Provider.Create(ctx, o)
	if err != nil {
		return nil, err
	}
	return &snapHandle{Handle: h, c: c}, nil
}

func (c *counting) DeleteSnapshot(ctx context.Context, snap string) error {
	if c.snapDir == "" {
		return sandbox.Unsupported("counting", "snapshots")
	}
	return os.RemoveAll(snap)
}

func (c *counting) Destroy(ctx context.Context, id string) error {
	c.destroys.Add(1)
	return c.Provider.Destroy(ctx, id)
}

type snapHandle struct {
	sandbox.Handle
	c *counting
}

func (h *snapHandle) Capabilities() sandbox.Capabilities { return h.c.Capabilities() }

func (h *snapHandle) Snapshot(ctx context.Context, label string) (sandbox.Snapshot, error) {
	if h.c.snapDir == "" {
		return sandbox.Snapshot{}, sandbox.Unsupported("counting", "snapshots")
	}
	dir := filepath.Join(h.c.snapDir, label+"-"+filepath.Base(h.ID()))
	if err := os.CopyFS(dir, os.DirFS(h.ID())); err != nil {
		return sandbox.Snapshot{}, err
	}
	return sandbox.Snapshot{ID: dir, Label: label}, nil
}

func newCounting(t *testing.T, snapshots bool) *counting {
	t.Helper()
	base := t.TempDir()
	p, err := local.New(local.Options{BaseDir: base})
	if err != nil {
		t.Fatal(err)
	}
	c := &counting{Provider: p, baseDir: base}
	if snapshots {
		c.snapDir = t.TempDir()
	}
	return c
}

func newManager(t *testing.T) (*ensure.Manager, *memstore.Store) {
	t.Helper()
	st := memstore.New(memstore.Options{})
	t.Cleanup(func() { st.Close() })
	return &ensure.Manager{Instances: st, Locker: st}, st
}

// setupCounter makes a setup step that appends to a host file, so the test
// can count how often setup ran (the local provider has no isolation).
func setupCounter(t *testing.T) (sandbox.SetupStep, func() int) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "count")
	return sandbox.SetupStep{Run: "echo x >> " + sandbox.ShellQuote(f) + " && echo made > setup.txt"}, func() int {
		b, _ := os.ReadFile(f)
		return strings.Count(string(b), "x")
	}
}

func TestCreateThenResume(t *testing.T) {
	ctx := context.Background()
	m, st := newManager(t)
	p := newCounting(t, false)
	step, runs := setupCounter(t)
	secrets, _ := sandbox.NewSecrets(map[string]string{"CORRAL_T_SECRET": "canary-value"})
	def := &sandbox.Definition{ID: "d", Provider: p, Workspace: &sandbox.Workspace{Setup: []sandbox.SetupStep{step}, Secrets: secrets}}

	r1, err := m.Ensure(ctx, def, ensure.Request{Thread: "t1", Run: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	if r1.Outcome != ensure.Created || r1.Bootstrap.StepsRun != 1 {
		t.Errorf("first ensure: %+v", r1)
	}
	r2, err := m.Ensure(ctx, def, ensure.Request{Thread: "t1", Run: "r2"})
	if err != nil {
		t.Fatal(err)
	}
	if r2.Outcome != ensure.Resumed || r2.Handle.ID() != r1.Handle.ID() || r2.Key != r1.Key {
		t.Errorf("second ensure: %v %s (first %s)", r2.Outcome, r2.Handle.ID(), r1.Handle.ID())
	}
	if p.creates.Load() != 1 || runs() != 1 {
		t.Errorf("creates %d, setup runs %d; want 1 and 1", p.creates.Load(), runs())
	}
	// Secrets are re-applied to the resumed handle.
	res, err := r2.Handle.Exec(ctx, sandbox.Command{Shell: `printf %s "$CORRAL_T_SECRET"`})
	if err != nil || string(res.Stdout) != "canary-value" {
		t.Errorf("secret after resume: %q %v", res.Stdout, err)
	}
	rec, ok, err := st.GetInstance(ctx, r1.Key)
	if err != nil || !ok || rec.LatestRunID != "r2" || rec.ProviderSandboxID != r1.Handle.ID() || rec.ThreadID != "t1" || rec.DefinitionID != "d" {
		t.Errorf("record = %+v, %v, %v", rec, ok, err)
	}
	// Another thread gets another sandbox.
	r3, err := m.Ensure(ctx, def, ensure.Request{Thread: "t2"})
	if err != nil || r3.Outcome != ensure.Created || r3.Handle.ID() == r1.Handle.ID() {
		t.Errorf("other thread: %+v %v", r3, err)
	}
}

func TestConcurrentEnsureCreatesOnce(t *testing.T) {
	ctx := context.Background()
	m, _ := newManager(t)
	p := newCounting(t, false)
	def := &sandbox.Definition{ID: "d", Provider: p, Workspace: &sandbox.Workspace{Setup: []sandbox.SetupStep{{Run: "sleep 0.2"}}}}
	const n = 8
	ids := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			r, err := m.Ensure(ctx, def, ensure.Request{Thread: "t"})
			if err != nil {
				t.Error(err)
				return
			}
			ids[i] = r.Handle.ID()
		})
	}
	wg.Wait()
	if p.creates.Load() != 1 {
		t.Errorf("%d creates, want 1", p.creates.Load())
	}
	for _, id := range ids {
		if id != ids[0] {
			t.Errorf("different sandboxes: %v", ids)
		}
	}
}

func TestRestoreFromSnapshotWithoutRerunningSetup(t *testing.T) {
	ctx := context.Background()
	m, st := newManager(t)
	p := newCounting(t, true)
	step, runs := setupCounter(t)
	def := &sandbox.Definition{ID: "d", Provider: p, Workspace: &sandbox.Workspace{Setup: []sandbox.SetupStep{step}}}
	r1, err := m.Ensure(ctx, def, ensure.Request{Thread: "t"})
	if err != nil {
		t.Fatal(err)
	}
	rec, _, _ := st.GetInstance(ctx, r1.Key)
	if rec.LatestSnapshotID == "" {
		t.Fatal("with snapshots, after-setup is the default and the record holds the snapshot")
	}
	// The sandbox disappears behind corral's back.
	if err := p.Provider.Destroy(ctx, r1.Handle.ID()); err != nil {
		t.Fatal(err)
	}
	r2, err := m.Ensure(ctx, def, ensure.Request{Thread: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if r2.Outcome != ensure.Restored || runs() != 1 {
		t.Errorf("outcome %v, setup runs %d; want restored and 1", r2.Outcome, runs())
	}
	if b, err := r2.Handle.FS().ReadFile(ctx, "setup.txt"); err != nil || string(b) != "made\n" {
		t.Errorf("setup's file after restore: %q %v", b, err)
	}
	rec2, _, _ := st.GetInstance(ctx, r1.Key)
	if rec2.ProviderSandboxID != r2.Handle.ID() || rec2.LatestSnapshotID != rec.LatestSnapshotID {
		t.Errorf("record after restore = %+v", rec2)
	}
	// The snapshot vanishes too: create anew.
	_ = os.RemoveAll(rec.LatestSnapshotID)
	_ = p.Provider.Destroy(ctx, r2.Handle.ID())
	r3, err := m.Ensure(ctx, def, ensure.Request{Thread: "t"})
	if err != nil || r3.Outcome != ensure.Created || runs() != 2 {
		t.Errorf("after losing the snapshot: %v %v, setup runs %d", r3.Outcome, err, runs())
	}
}

func TestGoneWithoutSnapshotsRecreates(t *testing.T) {
	ctx := context.Background()
	m, st := newManager(t)
	p := newCounting(t, false)
	def := &sandbox.Definition{ID: "d", Provider: p}
	r1, err := m.Ensure(ctx, def, ensure.Request{Thread: "t"})
	if err != nil {
		t.Fatal(err)
	}
	_ = p.Provider.Destroy(ctx, r1.Handle.ID())
	r2, err := m.Ensure(ctx, def, ensure.Request{Thread: "t"})
	if err != nil || r2.Outcome != ensure.Created {
		t.Fatalf("%v %v", r2.Outcome, err)
	}
	rec, _, _ := st.GetInstance(ctx, r2.Key)
	if rec.ProviderSandboxID != r2.Handle.ID() || rec.LatestSnapshotID != "" {
		t.Errorf("record = %+v", rec)
	}
}

func TestBackendErrorDoesNotCreateASecondSandbox(t *testing.T) {
	ctx := context.Background()
	m, _ := newManager(t)
	p := newCounting(t, false)
	def := &sandbox.Definition{ID: "d", Provider: p}
	if _, err := m.Ensure(ctx, def, ensure.Request{Thread: "t"}); err != nil {
		t.Fatal(err)
	}
	p.resumeErr = sandbox.Errorf(sandbox.Unavailable, "resume", "", "engine down")
	_, err := m.Ensure(ctx, def, ensure.Request{Thread: "t"})
	if sandbox.CodeOf(err) != sandbox.Unavailable || p.creates.Load() != 1 {
		t.Errorf("err %v, creates %d", err, p.creates.Load())
	}
}

func TestReuseNone(t *testing.T) {
	ctx := context.Background()
	m, _ := newManager(t)
	p := newCounting(t, false)
	def := &sandbox.Definition{ID: "d", Provider: p, Lifecycle: sandbox.Lifecycle{Reuse: sandbox.ReuseNone}}
	a, err := m.Ensure(ctx, def, ensure.Request{Thread: "t", Run: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.Ensure(ctx, def, ensure.Request{Thread: "t", Run: "r2"})
	if err != nil {
		t.Fatal(err)
	}
	if a.Handle.ID() == b.Handle.ID() || p.creates.Load() != 2 || p.resumes.Load() != 0 {
		t.Errorf("reuse none: %s %s creates %d resumes %d", a.Handle.ID(), b.Handle.ID(), p.creates.Load(), p.resumes.Load())
	}
	if _, err := m.Ensure(ctx, def, ensure.Request{Thread: "t"}); sandbox.CodeOf(err) != sandbox.InvalidArgument {
		t.Errorf("reuse none without a run: %v", err)
	}
}

func TestBootstrapFailureLeavesNothing(t *testing.T) {
	ctx := context.Background()
	m, st := newManager(t)
	p := newCounting(t, false)
	var hookErr error
	def := &sandbox.Definition{ID: "d", Provider: p,
		Workspace: &sandbox.Workspace{Setup: []sandbox.SetupStep{{Run: "echo broken; exit 7"}}},
		Hooks:     sandbox.Hooks{OnError: func(_ context.Context, err error) { hookErr = err }},
	}
	_, err := m.Ensure(ctx, def, ensure.Request{Thread: "t"})
	if err == nil || !strings.Contains(err.Error(), "exit 7") || hookErr == nil {
		t.Fatalf("err %v, hook %v", err, hookErr)
	}
	list, _ := st.ListInstances(ctx, store.InstanceFilter{})
	if len(list) != 0 {
		t.Errorf("a record was written: %+v", list)
	}
	if ents, _ := os.ReadDir(p.baseDir); len(ents) != 0 {
		t.Errorf("the half-made sandbox was left behind: %v", ents)
	}
}

func TestStaleRecordIsRecreated(t *testing.T) {
	ctx := context.Background()
	m, _ := newManager(t)
	now := time.Now()
	m.Now = func() time.Time { return now }
	p := newCounting(t, false)
	def := &sandbox.Definition{ID: "d", Provider: p, Lifecycle: sandbox.Lifecycle{SnapshotMaxAge: time.Hour}}
	a, err := m.Ensure(ctx, def, ensure.Request{Thread: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Handle.FS().WriteFile(ctx, "old.txt", nil); err != nil {
		t.Fatal(err)
	}
	now = now.Add(2 * time.Hour)
	b, err := m.Ensure(ctx, def, ensure.Request{Thread: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if b.Outcome != ensure.Created || p.resumes.Load() != 0 {
		t.Errorf("stale: %v, resumes %d", b.Outcome, p.resumes.Load())
	}
	if ok, _ := b.Handle.FS().Exists(ctx, "old.txt"); ok || p.destroys.Load() != 1 {
		t.Errorf("the stale sandbox must be destroyed (destroys %d)", p.destroys.Load())
	}
}

func TestEnsureExistingAndDestroy(t *testing.T) {
	m, st := newManager(t)
	p := newCounting(t, false)
	def := &sandbox.Definition{ID: "d", Provider: p}
	ctx := context.Background()
	if _, ok, err := m.EnsureExisting(ctx, def, ensure.Request{Thread: "t"}); ok || err != nil {
		t.Fatalf("no record: ok=%v err=%v", ok, err)
	}
	if p.creates.Load() != 0 {
		t.Fatal("EnsureExisting created a sandbox")
	}
	r, err := m.Ensure(ctx, def, ensure.Request{Thread: "t"})
	if err != nil {
		t.Fatal(err)
	}
	got, ok, err := m.EnsureExisting(ctx, def, ensure.Request{Thread: "t"})
	if !ok || err != nil || got.Handle.ID() != r.Handle.ID() {
		t.Fatalf("existing: %v %v", ok, err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	var destroyedKey string
	def.Hooks.OnDestroy = func(_ context.Context, key string) { destroyedKey = key }
	if err := m.Destroy(cancelled, def, ensure.Request{Thread: "t"}); err != nil {
		t.Fatalf("Destroy with a cancelled caller must still destroy: %v", err)
	}
	if _, err := os.Stat(r.Handle.ID()); !os.IsNotExist(err) {
		t.Error("sandbox still there")
	}
	if _, ok, _ := st.GetInstance(ctx, r.Key); ok {
		t.Error("record still there")
	}
	if destroyedKey != r.Key {
		t.Errorf("OnDestroy got %q", destroyedKey)
	}
	if err := m.Destroy(ctx, def, ensure.Request{Thread: "t"}); err != nil {
		t.Errorf("destroying again: %v", err)
	}
}

func TestReapIdle(t *testing.T) {
	ctx := context.Background()
	m, st := newManager(t)
	now := time.Now()
	m.Now = func() time.Time { return now }
	p := newCounting(t, false)
	def := &sandbox.Definition{ID: "d", Provider: p, Lifecycle: sandbox.Lifecycle{KeepAlive: 10 * time.Minute}}
	idle, _ := m.Ensure(ctx, def, ensure.Request{Thread: "idle"})
	busy, _ := m.Ensure(ctx, def, ensure.Request{Thread: "busy", Run: "running-run"})
	now = now.Add(5 * time.Minute)
	fresh, _ := m.Ensure(ctx, def, ensure.Request{Thread: "fresh"})
	now = now.Add(6 * time.Minute)
	var seen []string
	rep, err := m.ReapIdle(ctx, def, ensure.IdleOptions{Limit: 100, Decide: func(_ context.Context, st ensure.IdleState) (ensure.IdleAction, error) {
		seen = append(seen, st.Instance.ThreadID)
		if st.Instance.LatestRunID == "running-run" {
			return ensure.IdleKeep, nil
		}
		return ensure.IdleDestroy, nil
	}})
	if err != nil || rep.Destroyed != 1 || len(seen) != 2 {
		t.Fatalf("reaped %+v, %v, asked about %v; want 1 destroyed of idle and busy (fresh is not idle long enough)", rep, err, seen)
	}
	if _, err := os.Stat(idle.Handle.ID()); !os.IsNotExist(err) {
		t.Error("the idle sandbox survived")
	}
	for _, h := range []sandbox.Handle{busy.Handle, fresh.Handle} {
		if _, err := os.Stat(h.ID()); err != nil {
			t.Errorf("%s was reaped: %v", h.ID(), err)
		}
	}
	rec, ok, _ := st.GetInstance(ctx, idle.Key)
	if !ok || rec.ProviderSandboxID != "" {
		t.Errorf("the record stays, without a sandbox id: %+v", rec)
	}
	again, err := m.Ensure(ctx, def, ensure.Request{Thread: "idle"})
	if err != nil || again.Outcome != ensure.Created {
		t.Errorf("after reaping: %v %v", again.Outcome, err)
	}
}
