package journal_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/d10ffeed/corral/journal"
	"github.com/d10ffeed/corral/provider/local"
	"github.com/d10ffeed/corral/sandbox"
)

// countingHandle counts the commands run in the sandbox.
type countingHandle struct {
	sandbox.Handle
	execs, spawns *atomic.Int64
}

func (c *countingHandle) Unwrap() sandbox.Handle { return c.Handle }

func (c *countingHandle) Exec(ctx context.Context, cmd sandbox.Command) (*sandbox.ExecResult, error) {
	c.execs.Add(1)
	return c.Handle.Exec(ctx, cmd)
}

func (c *countingHandle) Spawn(ctx context.Context, cmd sandbox.Command) (sandbox.Process, error) {
	c.spawns.Add(1)
	return c.Handle.Spawn(ctx, cmd)
}

// TestHostReadAndRemoveRunNothing: on the local provider a run started by
// its driver (StartWatch) is read to its exit and its journal removed
// without one command in the sandbox (the old reader spawned a follower
// and ran an ls, the old Remove an rm); a link the agent put in place of
// the run's files directory is removed, not followed.
func TestHostReadAndRemoveRunNothing(t *testing.T) {
	lp, err := local.New(local.Options{BaseDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	var execs, spawns atomic.Int64
	g := sandbox.Guard(lp, sandbox.GuardOptions{Decorate: func(h sandbox.Handle) sandbox.Handle {
		return &countingHandle{Handle: h, execs: &execs, spawns: &spawns}
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	h, err := g.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Destroy(context.Background()) })
	p, err := journal.PathsFor(t.TempDir(), "host-run")
	if err != nil {
		t.Fatal(err)
	}
	keep := filepath.Join(t.TempDir(), "keep")
	if err := os.WriteFile(keep, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	nonce := journal.NewNonce()
	exited, err := journal.StartWatch(ctx, h, journal.Spec{Paths: p, Nonce: nonce,
		Agent: sandbox.Command{Shell: `echo one; printf two; ln -s "$K" "$F"; exit 3`, Env: map[string]string{"K": filepath.Dir(keep), "F": p.Files}}})
	if err != nil {
		t.Fatal(err)
	}
	e0, s0 := execs.Load(), spawns.Load()
	var lines []string
	x, err := (&journal.Reader{Handle: h, Paths: p, Nonce: nonce, Exited: exited}).Read(ctx, 0, func(l journal.Line) error {
		lines = append(lines, string(l.Data))
		return nil
	})
	if err != nil || x.Code != 3 || strings.Join(lines, "|") != "one|two" {
		t.Fatalf("read %q, exit %+v, %v; want one|two, exit 3", lines, x, err)
	}
	if err := journal.Remove(ctx, h, p); err != nil {
		t.Fatal(err)
	}
	e, s := execs.Load()-e0, spawns.Load()-s0
	t.Logf("sandbox commands for the read and the removal: %d (exec %d, spawn %d)", e+s, e, s)
	if e+s != 0 {
		t.Errorf("the read and the removal ran %d commands in the sandbox, want 0", e+s)
	}
	for _, f := range []string{p.Journal, p.Err, p.Files} {
		if _, err := os.Lstat(f); !os.IsNotExist(err) {
			t.Errorf("%s left after Remove (%v)", f, err)
		}
	}
	if _, err := os.Stat(keep); err != nil {
		t.Errorf("the file behind the agent's link was removed: %v", err)
	}
}
