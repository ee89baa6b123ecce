package run_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/d10ffeed/corral/harness/command"
	"github.com/d10ffeed/corral/provider/local"
	"github.com/d10ffeed/corral/run"
	"github.com/d10ffeed/corral/sandbox"
)

// snapLocal is the local provider with snapshots: a snapshot is a copy of
// the sandbox's directory.
type snapLocal struct {
	*local.Provider
	dir string
}

func (p *snapLocal) Capabilities() sandbox.Capabilities {
	c := p.Provider.Capabilities()
	c.Snapshots = true
	return c
}

func (p *snapLocal) Create(ctx context.Context, o sandbox.CreateOptions) (sandbox.Handle, error) {
	h, err := p.Provider.Create(ctx, o)
	if err != nil {
		return nil, err
	}
	return &snapLocalHandle{Handle: h, p: p}, nil
}

func (p *snapLocal) Resume(ctx context.Context, id string) (sandbox.Handle, error) {
	h, err := p.Provider.Resume(ctx, id)
	if err != nil {
		return nil, err
	}
	return &snapLocalHandle{Handle: h, p: p}, nil
}

func (p *snapLocal) DeleteSnapshot(_ context.Context, id string) error { return os.RemoveAll(id) }

type snapLocalHandle struct {
	sandbox.Handle
	p *snapLocal
}

func (h *snapLocalHandle) Capabilities() sandbox.Capabilities { return h.p.Capabilities() }

func (h *snapLocalHandle) Snapshot(_ context.Context, label string) (sandbox.Snapshot, error) {
	dir := filepath.Join(h.p.dir, label)
	if err := os.CopyFS(dir, os.DirFS(h.ID())); err != nil {
		return sandbox.Snapshot{}, err
	}
	return sandbox.Snapshot{ID: dir, Label: label}, nil
}

// TestSnapshotAfterRun: with snapshot: after-run, each run of a thread
// leaves the record naming a snapshot of its sandbox, and the snapshot it
// superseded is deleted.
func TestSnapshotAfterRun(t *testing.T) {
	lp, err := local.New(local.Options{BaseDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	p := &snapLocal{Provider: lp, dir: t.TempDir()}
	e := newEnv(t)
	e.def = &sandbox.Definition{ID: "d", Provider: p, Lifecycle: sandbox.Lifecycle{Snapshot: sandbox.SnapshotAfterRun}}
	r := e.runner(t, run.Options{})
	c := ctx(t)
	var snaps []string
	for i, word := range []string{"one", "two"} {
		rec, err := r.Start(c, run.StartRequest{Definition: "d", Thread: "t", Harness: command.Name, Args: []string{"sh", "-c", "echo " + word + " > word.txt"}})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Wait(c, rec.ID); err != nil {
			t.Fatal(err)
		}
		inst, ok, err := e.st.GetInstance(c, rec.SandboxKey)
		if err != nil || !ok || inst.LatestSnapshotID == "" {
			t.Fatalf("run %d: record %+v, %v, %v; want one naming a snapshot", i+1, inst, ok, err)
		}
		b, err := os.ReadFile(filepath.Join(inst.LatestSnapshotID, "word.txt"))
		if err != nil || string(b) != word+"\n" {
			t.Errorf("run %d: the snapshot holds %q, %v; want %q", i+1, b, err, word)
		}
		snaps = append(snaps, inst.LatestSnapshotID)
	}
	if _, err := os.Stat(snaps[0]); !os.IsNotExist(err) {
		t.Errorf("the superseded snapshot %s is still there (%v)", snaps[0], err)
	}
	left, _ := os.ReadDir(p.dir)
	t.Logf("2 runs: snapshots %q; %d left on disk", snaps, len(left))
	if len(left) != 1 {
		t.Errorf("%d snapshots on disk, want 1", len(left))
	}
}
