package qemu_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/provider/qemu"
	"github.com/d10ffeed/corral/sandbox"
)

// Benchmarks in pairs: corral's path and the raw floor under it. Under
// TCG (our CI) they measure emulation; the same benchmarks run under KVM
// where the host has it (Options.Accel auto). No timing is asserted.

func benchProvider(b *testing.B, opts qemu.Options) *qemu.Provider {
	p := newProvider(b, opts)
	b.Logf("accel %s", p.Accel())
	return p
}

// BenchmarkCreateToFirstCommand: Create (a boot template's restore) and
// the first Exec.
func BenchmarkCreateToFirstCommand(b *testing.B) {
	benchCreate(b, qemu.Options{})
}

// BenchmarkColdBootToFirstCommand: Create booting the kernel, first Exec.
func BenchmarkColdBootToFirstCommand(b *testing.B) {
	benchCreate(b, qemu.Options{ColdBoot: true})
}

func benchCreate(b *testing.B, opts qemu.Options) {
	p := benchProvider(b, opts)
	ctx := context.Background()
	// Warm up outside the timing: the first Create makes the boot template.
	if h, err := p.Create(ctx, sandbox.CreateOptions{Network: sandbox.NetworkDeny}); err == nil {
		_ = h.Destroy(ctx)
	}
	for b.Loop() {
		h, err := p.Create(ctx, sandbox.CreateOptions{Network: sandbox.NetworkDeny})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := h.Exec(ctx, sandbox.Command{Args: []string{"true"}}); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		_ = h.Destroy(ctx)
		b.StartTimer()
	}
}

// BenchmarkRawQEMUBoot is the floor: QEMU booted cold on fresh overlays
// until the agent answers.
func BenchmarkRawQEMUBoot(b *testing.B) {
	p := benchProvider(b, qemu.Options{})
	ctx := context.Background()
	for b.Loop() {
		stop, err := qemu.RawBoot(ctx, p)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		stop()
		b.StartTimer()
	}
}

// BenchmarkExec is one Exec round trip (wrapper, environment, pid line).
func BenchmarkExec(b *testing.B) {
	p := benchProvider(b, qemu.Options{})
	h := testutil.Create(b, p, sandbox.CreateOptions{Network: sandbox.NetworkDeny})
	ctx := context.Background()
	for b.Loop() {
		if _, err := h.Exec(ctx, sandbox.Command{Args: []string{"true"}}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRawAgentExec is the floor: `true` through the agent directly.
func BenchmarkRawAgentExec(b *testing.B) {
	p := benchProvider(b, qemu.Options{})
	h := testutil.Create(b, p, sandbox.CreateOptions{Network: sandbox.NetworkDeny})
	ctx := context.Background()
	for b.Loop() {
		if _, err := qemu.RawExec(ctx, h, "/bin/true"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSnapshot is Handle.Snapshot (memory and disk copies).
func BenchmarkSnapshot(b *testing.B) {
	p := benchProvider(b, qemu.Options{})
	h := testutil.Create(b, p, sandbox.CreateOptions{Network: sandbox.NetworkDeny})
	ctx := context.Background()
	for b.Loop() {
		s, err := h.Snapshot(ctx, "bench")
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		_ = p.DeleteSnapshot(ctx, s.ID)
		b.StartTimer()
	}
}

// BenchmarkRawMigrate is the floor: stop, migrate memory to a file, cont.
func BenchmarkRawMigrate(b *testing.B) {
	p := benchProvider(b, qemu.Options{})
	h := testutil.Create(b, p, sandbox.CreateOptions{Network: sandbox.NetworkDeny})
	ctx := context.Background()
	file := filepath.Join(b.TempDir(), "mem.bin")
	for b.Loop() {
		if err := qemu.RawMigrate(ctx, h, file); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRestore is RestoreSnapshot until the agent answers, then one
// Exec.
func BenchmarkRestore(b *testing.B) {
	p := benchProvider(b, qemu.Options{})
	h := testutil.Create(b, p, sandbox.CreateOptions{Network: sandbox.NetworkDeny})
	ctx := context.Background()
	s, err := h.Snapshot(ctx, "bench")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = p.DeleteSnapshot(context.Background(), s.ID) })
	for b.Loop() {
		r, err := p.RestoreSnapshot(ctx, s.ID, sandbox.CreateOptions{})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := r.Exec(ctx, sandbox.Command{Args: []string{"true"}}); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		_ = r.Destroy(ctx)
		b.StartTimer()
	}
}

// BenchmarkFork is Handle.Fork (snapshot, restore under a new id).
func BenchmarkFork(b *testing.B) {
	p := benchProvider(b, qemu.Options{})
	h := testutil.Create(b, p, sandbox.CreateOptions{Network: sandbox.NetworkDeny})
	ctx := context.Background()
	for b.Loop() {
		f, err := h.Fork(ctx)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		_ = f.Destroy(ctx)
		b.StartTimer()
	}
}
