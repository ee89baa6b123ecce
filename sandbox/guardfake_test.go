package sandbox_test

import (
	"context"
	"io"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/d10ffeed/corral/sandbox"
)

// recorder is the fake's call log, shared by a provider and its handles.
type recorder struct {
	mu    sync.Mutex
	calls []string
}

func (r *recorder) add(call string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, call)
}

func (r *recorder) called(call string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Contains(r.calls, call)
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.calls)
}

// fakeProvider records every call and does only what its hooks say; it
// enforces nothing (no validation, no Timeout, no OutputLimit, no
// capability checks), so whatever a guarded fake refuses, the guard did.
type fakeProvider struct {
	rec  *recorder
	caps sandbox.Capabilities
	// err, when set, is returned by every operation but Exec and Spawn.
	err error
	// exec, when set, is what Exec does.
	exec func(ctx context.Context, cmd sandbox.Command) (*sandbox.ExecResult, error)
	// nilHandle makes Create return (nil, nil).
	nilHandle bool

	mu     sync.Mutex
	spawns []*fakeProcess
}

func newFake(caps sandbox.Capabilities) *fakeProvider {
	return &fakeProvider{rec: &recorder{}, caps: caps}
}

func (p *fakeProvider) Name() string                       { return "fake" }
func (p *fakeProvider) Capabilities() sandbox.Capabilities { return p.caps }

func (p *fakeProvider) Create(_ context.Context, o sandbox.CreateOptions) (sandbox.Handle, error) {
	p.rec.add("create")
	if p.err != nil || p.nilHandle {
		return nil, p.err
	}
	id := o.ID
	if id == "" {
		id = "sb-1"
	}
	return &fakeHandle{p: p, id: id}, nil
}

func (p *fakeProvider) Resume(_ context.Context, id string) (sandbox.Handle, error) {
	p.rec.add("resume")
	if p.err != nil {
		return nil, p.err
	}
	return &fakeHandle{p: p, id: id}, nil
}

func (p *fakeProvider) RestoreSnapshot(_ context.Context, snap string, _ sandbox.CreateOptions) (sandbox.Handle, error) {
	p.rec.add("restore-snapshot")
	if p.err != nil {
		return nil, p.err
	}
	return &fakeHandle{p: p, id: "from-" + snap}, nil
}

func (p *fakeProvider) DeleteSnapshot(context.Context, string) error {
	p.rec.add("delete-snapshot")
	return p.err
}

func (p *fakeProvider) Destroy(context.Context, string) error {
	p.rec.add("destroy")
	return p.err
}

// fakeHandle is the fake's handle. Secret is a method only it has, for As
// through an interface.
type fakeHandle struct {
	p  *fakeProvider
	id string
}

func (h *fakeHandle) Secret() string                     { return "backend-" + h.id }
func (h *fakeHandle) ID() string                         { return h.id }
func (h *fakeHandle) Provider() string                   { return "fake" }
func (h *fakeHandle) WorkspaceRoot() string              { return sandbox.WorkspaceRoot }
func (h *fakeHandle) Capabilities() sandbox.Capabilities { return h.p.caps }
func (h *fakeHandle) FS() sandbox.FS                     { return nil }

func (h *fakeHandle) Exec(ctx context.Context, cmd sandbox.Command) (*sandbox.ExecResult, error) {
	h.p.rec.add("exec")
	if h.p.exec != nil {
		return h.p.exec(ctx, cmd)
	}
	return &sandbox.ExecResult{}, nil
}

func (h *fakeHandle) Spawn(ctx context.Context, _ sandbox.Command) (sandbox.Process, error) {
	h.p.rec.add("spawn")
	pr := &fakeProcess{ctx: ctx, exited: make(chan int, 1)}
	h.p.mu.Lock()
	h.p.spawns = append(h.p.spawns, pr)
	h.p.mu.Unlock()
	return pr, nil
}

func (h *fakeHandle) ConnectPort(context.Context, int) (sandbox.Endpoint, error) {
	h.p.rec.add("connect-port")
	return sandbox.Endpoint{URL: "http://127.0.0.1:1"}, h.p.err
}

func (h *fakeHandle) SetEnv(context.Context, map[string]string) error {
	h.p.rec.add("set-env")
	return h.p.err
}

func (h *fakeHandle) Snapshot(context.Context, string) (sandbox.Snapshot, error) {
	h.p.rec.add("snapshot")
	return sandbox.Snapshot{ID: "snap-1", SandboxID: h.id}, h.p.err
}

func (h *fakeHandle) Fork(context.Context) (sandbox.Handle, error) {
	h.p.rec.add("fork")
	if h.p.err != nil {
		return nil, h.p.err
	}
	return &fakeHandle{p: h.p, id: h.id + "-fork"}, nil
}

func (h *fakeHandle) Destroy(context.Context) error {
	h.p.rec.add("handle.destroy")
	return h.p.err
}

// fakeProcess ends when exit is called or, as a KillableProcesses
// provider's does, when its spawn context ends (exit 143, SIGTERM).
type fakeProcess struct {
	ctx    context.Context
	exited chan int
}

func (p *fakeProcess) exit(code int) { p.exited <- code }

func (p *fakeProcess) PID() int              { return 42 }
func (p *fakeProcess) Stdout() io.Reader     { return strings.NewReader("") }
func (p *fakeProcess) Stderr() io.Reader     { return strings.NewReader("") }
func (p *fakeProcess) Stdin() io.WriteCloser { return nil }

func (p *fakeProcess) Wait(ctx context.Context) (int, error) {
	select {
	case code := <-p.exited:
		return code, nil
	case <-p.ctx.Done():
		return 128 + int(syscall.SIGTERM), nil
	case <-ctx.Done():
		return -1, ctx.Err() // raw: the guard wraps it
	}
}

func (p *fakeProcess) Kill(context.Context, syscall.Signal) error { return nil }
