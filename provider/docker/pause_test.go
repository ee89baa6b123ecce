package docker_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/provider/docker"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/sandbox/ensure"
	"github.com/d10ffeed/corral/store/memstore"
)

// TestPauseResume: a guarded Docker sandbox pauses through sandbox.As
// (docker stop: the container stays, stopped; its processes end), the
// provider reports it paused without starting it, and Resume starts it
// again with its files intact.
func TestPauseResume(t *testing.T) {
	ctx := context.Background()
	raw := newProvider(t, docker.Options{})
	p := sandbox.Guard(raw, sandbox.GuardOptions{})
	api := apiClient(t)
	h, err := p.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	testutil.DestroyAtEnd(t, h)
	sh(t, h, "echo kept > kept.txt && mkdir -p d && echo deep > d/f")
	if _, err := h.Spawn(ctx, sandbox.Command{Args: []string{"sleep", "600"}}); err != nil {
		t.Fatal(err)
	}

	const procs = `for f in /proc/[0-9]*/cmdline; do tr '\0' ' ' < "$f"; echo; done`
	if got := sh(t, h, procs); !strings.Contains(got, "sleep 600") {
		t.Fatalf("the spawned process is not listed: %q", got)
	}

	var pr sandbox.PauseReporter
	if !sandbox.ProviderAs(p, &pr) {
		t.Fatal("the guarded docker provider does not report pauses")
	}
	if paused, err := pr.Paused(ctx, h.ID()); err != nil || paused {
		t.Fatalf("a running sandbox: paused %v, %v", paused, err)
	}
	var pa sandbox.Pauser
	if !sandbox.As(h, &pa) {
		t.Fatal("the guarded docker handle cannot pause")
	}
	if err := pa.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	if err := pa.Pause(ctx); err != nil {
		t.Fatalf("pausing a paused sandbox: %v", err)
	}
	cid, _ := docker.ContainerID(h)
	info, err := api.ContainerInspect(ctx, cid, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatalf("the container is gone after a pause: %v", err)
	}
	if info.Container.State.Running {
		t.Fatal("the container still runs after a pause")
	}
	for i := 0; i < 2; i++ { // asking does not start it
		if paused, err := pr.Paused(ctx, h.ID()); err != nil || !paused {
			t.Fatalf("a paused sandbox: paused %v, %v", paused, err)
		}
	}

	h2, err := p.Resume(ctx, h.ID())
	if err != nil {
		t.Fatal(err)
	}
	if paused, err := pr.Paused(ctx, h.ID()); err != nil || paused {
		t.Fatalf("after Resume: paused %v, %v", paused, err)
	}
	if id2, _ := docker.ContainerID(h2); id2 != cid {
		t.Fatalf("Resume gave container %s, want the paused %s", id2, cid)
	}
	if got := sh(t, h2, "cat kept.txt d/f"); got != "kept\ndeep\n" {
		t.Fatalf("files after pause and resume: %q", got)
	}
	if got := sh(t, h2, procs); strings.Contains(got, "sleep 600") {
		t.Fatalf("a process outlived the pause: %q", got)
	}
	wantCode(t, "Paused of a gone sandbox", func() error { _, err := pr.Paused(ctx, "corral-no-such-sandbox-"+randomHex(4)); return err }(), sandbox.NotFound)
}

// TestIdlePauseThenEnsure: the idle reaper pauses a Docker sandbox on an
// injected clock, and the thread's next ensure resumes the same container
// with its files.
func TestIdlePauseThenEnsure(t *testing.T) {
	ctx := context.Background()
	p := sandbox.Guard(newProvider(t, docker.Options{}), sandbox.GuardOptions{})
	st := memstore.New(memstore.Options{})
	t.Cleanup(func() { st.Close() })
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	m := &ensure.Manager{Instances: st, Locker: st, Now: func() time.Time { return now }}
	def := &sandbox.Definition{ID: "pause-" + randomHex(4), Provider: p, Lifecycle: sandbox.Lifecycle{Snapshot: sandbox.SnapshotNone, Idle: sandbox.Idle{Pause: 10 * time.Minute, Destroy: time.Hour}}}
	res, err := m.Ensure(ctx, def, ensure.Request{Thread: "t"})
	if err != nil {
		t.Fatal(err)
	}
	testutil.DestroyAtEnd(t, res.Handle)
	sh(t, res.Handle, "echo before > f.txt")
	now = now.Add(10 * time.Minute)
	rep, err := m.ReapIdle(ctx, def, ensure.IdleOptions{})
	if err != nil || rep.Paused != 1 {
		t.Fatalf("reap: %+v, %v", rep, err)
	}
	var pr sandbox.PauseReporter
	sandbox.ProviderAs(p, &pr)
	if paused, err := pr.Paused(ctx, res.Handle.ID()); err != nil || !paused {
		t.Fatalf("after the reap: paused %v, %v", paused, err)
	}
	again, err := m.Ensure(ctx, def, ensure.Request{Thread: "t"})
	if err != nil || again.Outcome != ensure.Resumed || again.Handle.ID() != res.Handle.ID() {
		t.Fatalf("ensure after the pause: %v, %v", again.Outcome, err)
	}
	if got := sh(t, again.Handle, "cat f.txt"); got != "before\n" {
		t.Fatalf("file after the pause: %q", got)
	}
}
