package qemu

import (
	"context"
	"io"
	"os"
	"path/filepath"

	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/sandbox/execproc"
)

// PID returns the QEMU pid of sandbox id, 0 when it is not running.
func PID(p *Provider, id string) int { return p.vmFor(vmID(id)).pid() }

// RawBoot is the floor of a boot: QEMU started on fresh overlays and the
// agent's Hello answered, with none of Create's bookkeeping. It returns a
// function that removes the VM.
func RawBoot(ctx context.Context, p *Provider) (func(), error) {
	if err := p.prepare(ctx); err != nil {
		return nil, err
	}
	root, err := p.rootImage(ctx)
	if err != nil {
		return nil, err
	}
	ws, err := p.workspaceBase(ctx)
	if err != nil {
		return nil, err
	}
	id := "raw-" + randHex(4)
	v := p.vmFor(id)
	c := &vmConfig{ID: id, Accel: p.accel, Machine: p.opts.Machine, CPUs: p.opts.CPUs, MemoryMB: p.opts.MemoryMB,
		Kernel: filepath.Join(p.kdir, "vmlinuz"), Initrd: p.initrd}
	if c.Accel == "tcg" {
		c.TSCkHz = tscKHz()
	}
	cleanup := func() { _ = p.Destroy(context.Background(), id) }
	if err := os.MkdirAll(v.dir, 0o755); err != nil {
		return nil, err
	}
	_ = writeConfig(v.configPath(), c)
	if err := qemuImg(ctx, "create", "-q", "-f", "qcow2", "-F", "raw", "-b", root, filepath.Join(v.dir, "root.qcow2")); err != nil {
		cleanup()
		return nil, err
	}
	if err := qemuImg(ctx, "create", "-q", "-f", "qcow2", "-F", "raw", "-b", ws, filepath.Join(v.dir, "ws.qcow2")); err != nil {
		cleanup()
		return nil, err
	}
	if err := p.launch(ctx, v, c, false); err != nil {
		cleanup()
		return nil, err
	}
	if err := agentFor(v, id).ensure(ctx); err != nil {
		cleanup()
		return nil, err
	}
	return cleanup, nil
}

// RawExec runs argv through the guest agent directly (no execproc
// wrapper, no environment): the floor of an exec round trip.
func RawExec(ctx context.Context, h sandbox.Handle, argv ...string) (int, error) {
	var qh *handle
	if !sandbox.As(h, &qh) {
		return 0, sandbox.Errorf(sandbox.InvalidArgument, "qemu.raw", h.ID(), "not a qemu handle")
	}
	s, err := qh.a.start(ctx, "qemu.raw", execproc.Spec{Argv: argv, Dir: "/"})
	if err != nil {
		return 0, err
	}
	if err := s.Copy(io.Discard, io.Discard); err != nil {
		return 0, err
	}
	_ = s.Close()
	return s.Exit(ctx)
}

// RawMigrate is the floor of a snapshot: stop, migrate the memory to
// file, cont — no disk copies, no records.
func RawMigrate(ctx context.Context, h sandbox.Handle, file string) error {
	var qh *handle
	if !sandbox.As(h, &qh) {
		return sandbox.Errorf(sandbox.InvalidArgument, "qemu.raw", h.ID(), "not a qemu handle")
	}
	q, err := dialQMP(ctx, qh.v.qmp)
	if err != nil {
		return err
	}
	defer q.close()
	if _, err := q.do(ctx, "migrate-set-parameters", map[string]any{"max-bandwidth": int64(8) << 30}); err != nil {
		return err
	}
	if _, err := q.do(ctx, "stop", nil); err != nil {
		return err
	}
	defer func() { _, _ = q.do(ctx, "cont", nil) }()
	if _, err := q.do(ctx, "migrate", map[string]any{"uri": "exec:cat > " + shellQuote(file)}); err != nil {
		return err
	}
	return q.waitMigration(ctx)
}

// OptionsOf returns the options p was made with (defaults applied).
func OptionsOf(p *Provider) Options { return p.opts }
