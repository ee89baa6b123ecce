package cloudflare_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/d10ffeed/corral/internal/fakecloud"
	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/journal"
	"github.com/d10ffeed/corral/provider/cloudflare"
	"github.com/d10ffeed/corral/sandbox"
)

// TestJournaledRunSurvivesDrops: a journaled run whose exec sockets drop
// mid-stream (the bridge's command runs on: nothing reaches it but a
// kill) still delivers every line exactly once, from the start and from
// an offset on reattach, and leaves no follower behind.
func TestJournaledRunSurvivesDrops(t *testing.T) {
	ctx := testutil.HangGuard(t)
	s := newFake(t)
	p, _ := newProvider(t, s, cloudflare.Options{})
	h, err := p.Create(ctx, sandbox.CreateOptions{ID: "drops"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Destroy(context.Background()) })
	paths, err := journal.PathsFor("", fmt.Sprintf("cf-drop-%d", time.Now().UnixNano()))
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
	f := s.Inject("exec", fakecloud.Fault{DropAfter: 16 << 10, Times: 6})
	all, exit := read(0)
	check(all, 0)
	t.Logf("journal of %d lines (%d bytes): %d exec streams hit, %d dropped mid-stream; delivered %d lines, each once, exit %d",
		lines, all[len(all)-1].End, f.Hits(), f.Drops(), len(all), exit.Code)
	if f.Drops() == 0 || exit.Code != 0 {
		t.Fatalf("drops %d exit %d: the fault never dropped a stream", f.Drops(), exit.Code)
	}
	f2 := s.Inject("exec", fakecloud.Fault{DropAfter: 16 << 10, Times: 6})
	rest, exit2 := read(all[1499].End)
	check(rest, 1500)
	t.Logf("reattached at offset %d: %d lines (1500..2999), each once, %d more streams dropped, exit %d", all[1499].End, len(rest), f2.Drops(), exit2.Code)
	sb := s.Sandboxes("drops", nil)[0]
	left := -1
	for range 100 { // a bounded wait for the last follower's kill to land; the verdict is the count
		if left = sb.Procs(); left == 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("processes left in the sandbox after both reads: %d", left)
	if left != 0 {
		t.Fatalf("%d processes left running (a follower whose socket dropped was never killed)", left)
	}
}
