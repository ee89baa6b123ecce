package ensure_test

import (
	"context"
	"errors"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/sandbox/ensure"
	"github.com/d10ffeed/corral/store"
)

// pausing is the counting provider with pauses: a paused mark per sandbox
// that Resume clears (as Docker's Resume starts a stopped container).
type pausing struct {
	*counting
	mu     sync.Mutex
	paused map[string]bool
	pauses int
}

func newPausing(t *testing.T) *pausing {
	t.Helper()
	return &pausing{counting: newCounting(t, false), paused: map[string]bool{}}
}

func (p *pausing) Resume(ctx context.Context, id string) (sandbox.Handle, error) {
	h, err := p.counting.Resume(ctx, id)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	delete(p.paused, id)
	p.mu.Unlock()
	return &pauseHandle{Handle: h, p: p}, nil
}

func (p *pausing) Create(ctx context.Context, o sandbox.CreateOptions) (sandbox.Handle, error) {
	h, err := p.counting.Create(ctx, o)
	if err != nil {
		return nil, err
	}
	return &pauseHandle{Handle: h, p: p}, nil
}

func (p *pausing) Paused(ctx context.Context, id string) (bool, error) {
	if _, err := os.Stat(id); err != nil {
		return false, sandbox.Errorf(sandbox.NotFound, "pausing", id, "gone")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.paused[id], nil
}

func (p *pausing) isPaused(id string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.paused[id]
}

type pauseHandle struct {
	sandbox.Handle
	p *pausing
}

func (h *pauseHandle) Unwrap() sandbox.Handle { return h.Handle }

func (h *pauseHandle) Pause(ctx context.Context) error {
	h.p.mu.Lock()
	defer h.p.mu.Unlock()
	h.p.paused[h.ID()] = true
	h.p.pauses++
	return nil
}

// TestReapIdlePausesThenDestroys walks one sandbox through the record-only
// decision (idle since UpdatedAt) on an injected clock: kept before pause,
// paused at pause (once), destroyed at destroy with the hook first and the
// sandbox running for it; and the hook's failure or panic keeps the
// sandbox, paused again.
func TestReapIdlePausesThenDestroys(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name     string
		hook     func(p *pausing, id string) error
		wantKept bool
	}{
		{"hook succeeds", func(p *pausing, id string) error {
			if p.isPaused(id) {
				return errors.New("the hook got a paused sandbox")
			}
			return nil
		}, false},
		{"hook fails", func(*pausing, string) error { return errors.New("checkpoint store down") }, true},
		{"hook panics", func(*pausing, string) error { panic("broken hook") }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, st := newManager(t)
			now := t0
			m.Now = func() time.Time { return now }
			p := newPausing(t)
			g := sandbox.Guard(p, sandbox.GuardOptions{})
			def := &sandbox.Definition{ID: "d", Provider: g, Lifecycle: sandbox.Lifecycle{Idle: sandbox.Idle{Pause: 10 * time.Minute, Destroy: time.Hour}}}
			res, err := m.Ensure(ctx, def, ensure.Request{Thread: "t", Run: "r1"})
			if err != nil {
				t.Fatal(err)
			}
			id := res.Handle.ID()
			hooked := 0
			opts := ensure.IdleOptions{BeforeDestroy: func(ctx context.Context, inst store.Instance, h sandbox.Handle) error {
				hooked++
				if inst.Key != res.Key || h.ID() != id {
					t.Errorf("hook got %s / %s", inst.Key, h.ID())
				}
				return tc.hook(p, id)
			}}
			steps := []struct {
				at                    time.Duration
				paused, destroyed     int
				wantPaused, wantAlive bool
			}{
				{9 * time.Minute, 0, 0, false, true},
				{10 * time.Minute, 1, 0, true, true},
				{30 * time.Minute, 0, 0, true, true}, // paused already: not again
			}
			for _, s := range steps {
				now = t0.Add(s.at)
				rep, err := m.ReapIdle(ctx, def, opts)
				if err != nil || rep.Paused != s.paused || rep.Destroyed != s.destroyed {
					t.Fatalf("at %s: %+v, %v", s.at, rep, err)
				}
				if p.isPaused(id) != s.wantPaused {
					t.Fatalf("at %s: paused %v", s.at, p.isPaused(id))
				}
			}
			now = t0.Add(time.Hour)
			rep, err := m.ReapIdle(ctx, def, opts)
			if err != nil || hooked != 1 {
				t.Fatalf("at the destroy time: %+v, %v, hook called %d times", rep, err, hooked)
			}
			_, statErr := os.Stat(id)
			rec, _, _ := st.GetInstance(ctx, res.Key)
			if tc.wantKept {
				if rep.HookFailed != 1 || rep.Destroyed != 0 || statErr != nil || rec.ProviderSandboxID != id || !p.isPaused(id) {
					t.Fatalf("a failed hook must keep the sandbox, paused: %+v, stat %v, record %q, paused %v", rep, statErr, rec.ProviderSandboxID, p.isPaused(id))
				}
				return
			}
			if rep.Destroyed != 1 || !os.IsNotExist(statErr) || rec.ProviderSandboxID != "" || rec.Key != res.Key {
				t.Fatalf("destroy: %+v, stat %v, record %+v", rep, statErr, rec)
			}
			if p.pauses != 1 {
				t.Errorf("paused %d times, want 1", p.pauses)
			}
		})
	}
}

// TestReapIdleResumeStartsAPausedSandbox: the thread's next ensure of a
// paused sandbox resumes it (running again, same sandbox, files kept).
func TestReapIdleResumeStartsAPausedSandbox(t *testing.T) {
	ctx := context.Background()
	m, _ := newManager(t)
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	m.Now = func() time.Time { return now }
	p := newPausing(t)
	def := &sandbox.Definition{ID: "d", Provider: sandbox.Guard(p, sandbox.GuardOptions{}), Lifecycle: sandbox.Lifecycle{Idle: sandbox.Idle{Pause: time.Minute}}}
	res, err := m.Ensure(ctx, def, ensure.Request{Thread: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Handle.FS().WriteFile(ctx, "kept.txt", []byte("x")); err != nil {
		t.Fatal(err)
	}
	now = now.Add(2 * time.Minute)
	if rep, err := m.ReapIdle(ctx, def, ensure.IdleOptions{}); err != nil || rep.Paused != 1 {
		t.Fatalf("pause: %+v, %v", rep, err)
	}
	again, err := m.Ensure(ctx, def, ensure.Request{Thread: "t"})
	if err != nil || again.Outcome != ensure.Resumed || again.Handle.ID() != res.Handle.ID() || p.isPaused(res.Handle.ID()) {
		t.Fatalf("ensure after pause: %v %v (paused %v)", again.Outcome, err, p.isPaused(res.Handle.ID()))
	}
	if b, err := again.Handle.FS().ReadFile(ctx, "kept.txt"); err != nil || string(b) != "x" {
		t.Fatalf("file after pause: %q %v", b, err)
	}
}

// TestReapIdleDecisionError: an error from Decide keeps the sandbox and is
// counted.
func TestReapIdleDecisionError(t *testing.T) {
	ctx := context.Background()
	m, _ := newManager(t)
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	m.Now = func() time.Time { return now }
	p := newCounting(t, false)
	def := &sandbox.Definition{ID: "d", Provider: p, Lifecycle: sandbox.Lifecycle{KeepAlive: time.Minute}}
	res, err := m.Ensure(ctx, def, ensure.Request{Thread: "t"})
	if err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Hour)
	rep, err := m.ReapIdle(ctx, def, ensure.IdleOptions{Decide: func(context.Context, ensure.IdleState) (ensure.IdleAction, error) {
		return "", errors.New("store down")
	}})
	if err != nil || rep.Failed != 1 || rep.Destroyed != 0 {
		t.Fatalf("%+v, %v", rep, err)
	}
	if _, err := os.Stat(res.Handle.ID()); err != nil {
		t.Fatalf("the sandbox went: %v", err)
	}
}
