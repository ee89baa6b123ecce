package railway_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/d10ffeed/corral/internal/fakecloud"
	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/journal"
	"github.com/d10ffeed/corral/provider/railway"
	"github.com/d10ffeed/corral/provider/railway/railwayfake"
	"github.com/d10ffeed/corral/sandbox"
)

// procsLeft waits (bounded) for the sandbox's processes to end and
// returns how many are left; the count is the verdict.
func procsLeft(f *railwayfake.Fake, id string) int {
	left := f.Procs(id)
	for i := 0; i < 200 && left != 0; i++ {
		time.Sleep(50 * time.Millisecond)
		left = f.Procs(id)
	}
	return left
}

// TestDroppedExecSocket: the exec socket drops mid-command. Railway keeps
// the command's durable session running after its client leaves (the
// SDK's exec rejects with ExecInterruptedError; its reattach by session
// name replays the retained output). corral's Exec reattaches and
// delivers the whole output once, with the exit code. A socket that keeps
// dropping past the reattach budget makes Exec Unavailable, saying how
// much output arrived; then the next Exec still works.
func TestDroppedExecSocket(t *testing.T) {
	f := newFake(t)
	ctx := testutil.HangGuard(t)
	p, _ := newProvider(t, f, railway.Options{})
	h, err := p.Create(ctx, sandbox.CreateOptions{ID: "drop"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Destroy(context.Background()) })
	const script = `i=0; while [ $i -lt 2000 ]; do echo "out $i"; echo "err $i" >&2; i=$((i+1)); done; exit 7`
	var wantOut, wantErr strings.Builder
	for i := range 2000 {
		fmt.Fprintf(&wantOut, "out %d\n", i)
		fmt.Fprintf(&wantErr, "err %d\n", i)
	}
	in := f.Inject("exec", fakecloud.Fault{DropAfter: 4 << 10, Times: 3})
	before := f.Count("exec")
	res, err := h.Exec(ctx, sandbox.Command{Shell: script})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("3 drops (%d hit, %d dropped): %d exec sockets for one Exec; stdout %d of %d bytes, stderr %d of %d, exit %d",
		in.Hits(), in.Drops(), f.Count("exec")-before, len(res.Stdout), wantOut.Len(), len(res.Stderr), wantErr.Len(), res.ExitCode)
	if string(res.Stdout) != wantOut.String() || string(res.Stderr) != wantErr.String() || res.ExitCode != 7 || in.Drops() != 3 {
		t.Fatalf("after reattaching: exit %d, stdout %d bytes, stderr %d bytes, drops %d", res.ExitCode, len(res.Stdout), len(res.Stderr), in.Drops())
	}

	in = f.Inject("exec", fakecloud.Fault{DropAfter: 100, Times: 6}) // the first socket and all 5 reattaches
	_, err = h.Exec(ctx, sandbox.Command{Shell: "head -c 100000 /dev/zero"})
	t.Logf("a socket that always drops: %d of 6 dropped: %v", in.Drops(), err)
	if sandbox.CodeOf(err) != sandbox.Unavailable || !strings.Contains(err.Error(), "dropped") || in.Drops() != 6 {
		t.Fatalf("code %v, drops %d: %v", sandbox.CodeOf(err), in.Drops(), err)
	}
	res, err = h.Exec(ctx, sandbox.Command{Shell: "echo after"})
	if err != nil || string(res.Stdout) != "after\n" {
		t.Fatalf("next exec: %v %+v", err, res)
	}
}

// TestJournaledRunSurvivesDrops: a journaled run whose exec sockets drop
// mid-stream still delivers every line exactly once, from the start and
// from an offset on reattach, and leaves no follower behind.
func TestJournaledRunSurvivesDrops(t *testing.T) {
	ctx := testutil.HangGuard(t)
	f := newFake(t)
	p, _ := newProvider(t, f, railway.Options{})
	h, err := p.Create(ctx, sandbox.CreateOptions{ID: "drops"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Destroy(context.Background()) })
	paths, err := journal.PathsFor("", fmt.Sprintf("rw-drop-%d", time.Now().UnixNano()))
	if err != nil {
		t.Fatal(err)
	}
	nonce := journal.NewNonce()
	const lines = 3000
	script := fmt.Sprintf(`i=0; while [ $i -lt %d ]; do echo "line $i of the run, padded to make the journal larger than one stream's budget"; i=$((i+1)); done`, lines)
	if err := journal.Start(ctx, h, journal.Spec{Paths: paths, Nonce: nonce, Agent: sandbox.Command{Shell: script}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = journal.Remove(context.Background(), h, paths) })
	read := func(from int64) ([]journal.Line, journal.Exit) {
		r := &journal.Reader{Handle: h, Paths: paths, Nonce: nonce, Strategy: journal.Follow, PollInterval: 50 * time.Millisecond}
		var got []journal.Line
		exit, err := r.Read(ctx, from, func(l journal.Line) error {
			got = append(got, l)
			return nil
		})
		if err != nil {
			t.Fatalf("Read from %d: %v", from, err)
		}
		return got, exit
	}
	check := func(got []journal.Line, first int) {
		t.Helper()
		if len(got) != lines-first {
			t.Fatalf("got %d lines, want %d", len(got), lines-first)
		}
		for i, l := range got {
			if want := fmt.Sprintf("line %d of", first+i); !strings.HasPrefix(string(l.Data), want) {
				t.Fatalf("line %d is %q, want %q…", i, l.Data, want)
			}
		}
	}
	in := f.Inject("exec", fakecloud.Fault{DropAfter: 16 << 10, Times: 6})
	all, exit := read(0)
	check(all, 0)
	t.Logf("journal of %d lines (%d bytes): %d exec sockets hit, %d dropped mid-stream; delivered %d lines, each once, exit %d",
		lines, all[len(all)-1].End, in.Hits(), in.Drops(), len(all), exit.Code)
	if in.Drops() == 0 || exit.Code != 0 {
		t.Fatalf("drops %d exit %d: the fault never dropped a stream", in.Drops(), exit.Code)
	}
	in2 := f.Inject("exec", fakecloud.Fault{DropAfter: 16 << 10, Times: 6})
	rest, exit2 := read(all[1499].End)
	check(rest, 1500)
	t.Logf("reattached at offset %d: %d lines (1500..2999), each once, %d more sockets dropped, exit %d", all[1499].End, len(rest), in2.Drops(), exit2.Code)
	left := procsLeft(f, h.ID())
	t.Logf("processes left in the sandbox after both reads: %d", left)
	if left != 0 {
		t.Fatalf("%d processes left running (a follower whose socket dropped was never killed)", left)
	}
}
