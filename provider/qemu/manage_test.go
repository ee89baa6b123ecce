package qemu_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/d10ffeed/corral/provider/qemu"
	"github.com/d10ffeed/corral/provider/registry"
	"github.com/d10ffeed/corral/sandbox"
)

// TestManage lists, snapshots and prunes in a cache of its own (so the
// prune cannot reach other tests' VMs).
func TestManage(t *testing.T) {
	requireQEMU(t)
	cur, err := os.ReadFile(filepath.Join(qemu.DefaultCache, "current"))
	if err != nil {
		t.Skip("no kernel in the default cache")
	}
	p := newProvider(t, qemu.Options{Cache: t.TempDir(), Kernel: strings.TrimSpace(string(cur)), ColdBoot: true})
	m := qemu.Managed{Provider: p}
	ctx := context.Background()
	h, err := p.Create(ctx, sandbox.CreateOptions{Network: sandbox.NetworkDeny})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Destroy(context.Background()) })
	snap, err := h.Snapshot(ctx, "kept")
	if err != nil {
		t.Fatal(err)
	}
	list, err := m.ListSandboxes(ctx)
	if err != nil || len(list) != 1 || list[0].ID != h.ID() || list[0].State != "running" {
		t.Fatalf("ListSandboxes = %+v, %v", list, err)
	}
	snaps, err := m.ListSnapshots(ctx)
	if err != nil || len(snaps) != 1 || snaps[0].ID != snap.ID || snaps[0].Label != "kept" {
		t.Fatalf("ListSnapshots = %+v, %v", snaps, err)
	}
	rep, err := m.Prune(ctx, registry.PruneOptions{DryRun: true})
	if err != nil || len(rep.Sandboxes) != 1 || len(rep.Snapshots) != 1 {
		t.Fatalf("dry run %+v, %v", rep, err)
	}
	if list, _ := m.ListSandboxes(ctx); len(list) != 1 {
		t.Fatal("the dry run removed something")
	}
	if _, err := m.Prune(ctx, registry.PruneOptions{}); err != nil {
		t.Fatal(err)
	}
	list, _ = m.ListSandboxes(ctx)
	snaps, _ = m.ListSnapshots(ctx)
	if len(list) != 0 || len(snaps) != 0 {
		t.Fatalf("after prune: %v sandboxes, %v snapshots", list, snaps)
	}
	if _, err := p.Resume(ctx, h.ID()); sandbox.CodeOf(err) != sandbox.NotFound {
		t.Fatalf("Resume after prune: %v", err)
	}
}
