package qemu

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/d10ffeed/corral/sandbox"
)

// snapPrefix starts every snapshot id this provider makes.
const snapPrefix = "qsnap-"

// snapMeta is a snapshot's record (snapshot.json).
type snapMeta struct {
	ID        string    `json:"id"`
	Label     string    `json:"label,omitempty"`
	SandboxID string    `json:"sandboxId"`
	CreatedAt time.Time `json:"createdAt"`
	VM        vmConfig  `json:"vm"`
	MemBytes  int64     `json:"memBytes"`

	dir      string // where it is stored
	template bool   // a boot template, not a user's snapshot
}

func (p *Provider) snapDir(id string) (string, error) {
	if !strings.HasPrefix(id, snapPrefix) || !idRe.MatchString(id) {
		return "", sandbox.Errorf(sandbox.NotFound, "qemu.snapshot", id, "not a qemu snapshot id")
	}
	return filepath.Join(p.cache, "snapshots", id), nil
}

// Snapshot pauses the VM, saves its memory and device state (QEMU's
// migration stream to a file) and copies its disk overlays, then lets it
// run on. Processes in the VM keep running in the VM and in every restore.
func (h *handle) Snapshot(ctx context.Context, label string) (sandbox.Snapshot, error) {
	m, err := h.snapshot(ctx, "qemu.snapshot", label)
	if err != nil {
		return sandbox.Snapshot{}, err
	}
	return sandbox.Snapshot{ID: m.ID, Label: m.Label, SandboxID: m.SandboxID, CreatedAt: m.CreatedAt}, nil
}

func (h *handle) snapshot(ctx context.Context, op, label string) (*snapMeta, error) {
	id := snapPrefix + time.Now().UTC().Format("20060102t150405") + "-" + randHex(4)
	dir := filepath.Join(h.p.cache, "snapshots", id)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, sandbox.Wrap(sandbox.Internal, op, h.c.ID, err)
	}
	fail := func(code sandbox.Code, err error) (*snapMeta, error) {
		_ = os.RemoveAll(dir)
		return nil, sandbox.Wrap(code, op, h.c.ID, err)
	}
	c, err := readConfig(h.v.configPath())
	if err != nil {
		return fail(sandbox.NotFound, err)
	}
	if h.v.pid() == 0 {
		return fail(sandbox.NotFound, errGone)
	}
	q, err := dialQMP(ctx, h.v.qmp)
	if err != nil {
		return fail(sandbox.Unavailable, err)
	}
	defer q.close()
	mem := filepath.Join(dir, "memory.bin")
	if _, err := q.do(ctx, "migrate-set-parameters", map[string]any{"max-bandwidth": int64(8) << 30}); err != nil {
		return fail(sandbox.Unavailable, err)
	}
	if _, err := q.do(ctx, "stop", nil); err != nil {
		return fail(sandbox.Unavailable, err)
	}
	// Whatever happens next, the source VM runs on.
	defer func() { _, _ = q.do(context.WithoutCancel(ctx), "cont", nil) }()
	if _, err := q.do(ctx, "migrate", map[string]any{"uri": "exec:cat > " + shellQuote(mem)}); err != nil {
		return fail(sandbox.Unavailable, err)
	}
	if err := q.waitMigration(ctx); err != nil {
		return fail(sandbox.Unavailable, err)
	}
	for _, d := range []string{"root.qcow2", "ws.qcow2"} {
		if err := copyFile(ctx, filepath.Join(h.v.dir, d), filepath.Join(dir, d)); err != nil {
			return fail(sandbox.Internal, err)
		}
	}
	m := &snapMeta{ID: id, Label: label, SandboxID: h.c.ID, CreatedAt: time.Now().UTC(), VM: *c, dir: dir}
	if fi, err := os.Stat(mem); err == nil {
		m.MemBytes = fi.Size()
	}
	m.VM.Ports = nil
	if err := writeJSON(filepath.Join(dir, "snapshot.json"), m); err != nil {
		return fail(sandbox.Internal, err)
	}
	return m, nil
}

// Fork snapshots the VM and restores the snapshot under a new id with its
// own disks; the snapshot is removed afterwards. The fork has the
// parent's environment (copied in memory) and processes.
func (h *handle) Fork(ctx context.Context) (sandbox.Handle, error) {
	m, err := h.snapshot(ctx, "qemu.fork", "fork")
	if err != nil {
		return nil, err
	}
	defer func() { _ = h.p.DeleteSnapshot(context.WithoutCancel(ctx), m.ID) }()
	f, err := h.p.restore(ctx, "qemu.fork", m, sandbox.CreateOptions{})
	if err != nil {
		return nil, err
	}
	_ = f.Env().Set(h.Env().Copy())
	return f, nil
}

// RestoreSnapshot starts a new VM from a snapshot: its memory, so the
// processes that ran at the snapshot run on, and copies of its disks.
// opts.ID names the new sandbox; opts.Env is applied; the network gate is
// the snapshot's.
func (p *Provider) RestoreSnapshot(ctx context.Context, snapshot string, opts sandbox.CreateOptions) (sandbox.Handle, error) {
	const op = "qemu.restore"
	dir, err := p.snapDir(snapshot)
	if err != nil {
		return nil, err
	}
	var m snapMeta
	if err := readJSON(filepath.Join(dir, "snapshot.json"), &m); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, sandbox.Errorf(sandbox.NotFound, op, snapshot, "no such snapshot")
		}
		return nil, sandbox.Wrap(sandbox.Internal, op, snapshot, err)
	}
	m.dir = dir
	h, err := p.restore(ctx, op, &m, opts)
	if err != nil {
		return nil, err
	}
	_ = h.Env().Set(opts.Env)
	return h, nil
}

func (p *Provider) restore(ctx context.Context, op string, m *snapMeta, opts sandbox.CreateOptions) (*handle, error) {
	sdir := m.dir
	id := vmID(opts.ID)
	v := p.vmFor(id)
	if err := os.MkdirAll(filepath.Dir(v.dir), 0o755); err != nil {
		return nil, sandbox.Wrap(sandbox.Internal, op, id, err)
	}
	if err := os.Mkdir(v.dir, 0o755); err != nil {
		if errors.Is(err, os.ErrExist) {
			return nil, sandbox.Errorf(sandbox.AlreadyExists, op, id, "a sandbox with this id exists")
		}
		return nil, sandbox.Wrap(sandbox.Internal, op, id, err)
	}
	c := m.VM
	c.ID, c.CreatedAt, c.Ports = id, time.Now().UTC(), nil
	if opts.Labels != nil || m.template {
		c.Labels = opts.Labels
	}
	return p.boot(ctx, op, v, &c, func(ctx context.Context) error {
		for _, d := range []string{"root.qcow2", "ws.qcow2"} {
			if err := copyFile(ctx, filepath.Join(sdir, d), filepath.Join(v.dir, d)); err != nil {
				return err
			}
		}
		return nil
	}, filepath.Join(sdir, "memory.bin"))
}

// DeleteSnapshot removes a snapshot. A snapshot that is gone is fine;
// restored VMs hold copies of its disks, so none depends on it.
func (p *Provider) DeleteSnapshot(ctx context.Context, snapshot string) error {
	dir, err := p.snapDir(snapshot)
	if err != nil {
		return sandbox.Errorf(sandbox.InvalidArgument, "qemu.delete-snapshot", snapshot, "not a qemu snapshot id")
	}
	if err := os.RemoveAll(dir); err != nil {
		return sandbox.Wrap(sandbox.Internal, "qemu.delete-snapshot", snapshot, err)
	}
	return nil
}

// SnapshotInfo describes one stored snapshot.
type SnapshotInfo struct {
	ID        string    `json:"id"`
	Label     string    `json:"label,omitempty"`
	SandboxID string    `json:"sandboxId"`
	CreatedAt time.Time `json:"createdAt"`
	// Bytes is the size of the memory file and disk copies.
	Bytes int64 `json:"bytes"`
}

// ListSnapshots lists stored snapshots, newest first.
func (p *Provider) ListSnapshots(ctx context.Context) ([]SnapshotInfo, error) {
	ents, err := os.ReadDir(filepath.Join(p.cache, "snapshots"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, sandbox.Wrap(sandbox.Internal, "qemu.list-snapshots", "", err)
	}
	var out []SnapshotInfo
	for _, e := range ents {
		var m snapMeta
		dir := filepath.Join(p.cache, "snapshots", e.Name())
		if readJSON(filepath.Join(dir, "snapshot.json"), &m) != nil {
			continue
		}
		si := SnapshotInfo{ID: m.ID, Label: m.Label, SandboxID: m.SandboxID, CreatedAt: m.CreatedAt}
		fs, _ := os.ReadDir(dir)
		for _, f := range fs {
			if fi, err := f.Info(); err == nil {
				si.Bytes += fi.Size()
			}
		}
		out = append(out, si)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CreatedAt.After(out[j].CreatedAt) })
	return out, nil
}

// PruneSnapshots deletes snapshots older than age and returns their ids.
func (p *Provider) PruneSnapshots(ctx context.Context, age time.Duration) ([]string, error) {
	list, err := p.ListSnapshots(ctx)
	if err != nil {
		return nil, err
	}
	var gone []string
	for _, s := range list {
		if time.Since(s.CreatedAt) < age {
			continue
		}
		if err := p.DeleteSnapshot(ctx, s.ID); err != nil {
			return gone, err
		}
		gone = append(gone, s.ID)
	}
	return gone, nil
}

func writeJSON(path string, v any) error {
	b, err := jsonIndent(v)
	if err != nil {
		return err
	}
	return writeAtomic(path, b)
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := jsonUnmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
