// Package turntest helps the tests and benchmarks of agent turns (the
// harnesses with warm sessions): a turn followed to its first text, the
// next-turn benchmark's timing of it, and the fake model's own floor.
package turntest

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/run"
	"github.com/d10ffeed/corral/store"
)

// UntilText follows run id on r until its first text arrives (or ctx
// ends).
func UntilText(ctx context.Context, r *run.Runner, id string) {
	fctx, stop := context.WithCancel(ctx)
	defer stop()
	_ = r.Follow(fctx, id, 0, func(e store.Event) error {
		if ev, err := event.Unmarshal(e.Data); err == nil && ev.Type == event.TextMessageContent {
			stop()
		}
		return nil
	})
}

// CancelLeavesNothing cancels run id on r, which a warm keeper leading
// session sid serves mid-turn, and fails tb unless the run ends cancelled
// and no process of that session is left.
func CancelLeavesNothing(tb testing.TB, ctx context.Context, r *run.Runner, id string, sid int) {
	tb.Helper()
	if _, err := r.Cancel(ctx, id); err != nil {
		tb.Fatal(err)
	}
	_ = r.Wait(ctx, id)
	final, _, err := r.Store().GetRun(ctx, id)
	if err != nil {
		tb.Fatal(err)
	}
	if final.Status != store.RunCancelled {
		tb.Errorf("status %s, want cancelled", final.Status)
	}
	// The kill is delivered at once, the exit takes a moment: WaitFor's
	// bound is a hang guard, not a timing verdict.
	testutil.WaitFor(tb, ctx, "the keeper's session to be gone after the cancel", 50*time.Millisecond,
		func(context.Context) (bool, error) { return len(testutil.SessionProcs(sid)) == 0, nil })
}

// NextTurn runs a harness's next-turn sub-benchmarks: "floor", the fake
// model's own latency, then "cold" and "warm", each next with option
// warm "false" and "true".
func NextTurn(b *testing.B, floor func(b *testing.B), next func(b *testing.B, warm string)) {
	b.Run("floor", floor)
	b.Run("cold", func(b *testing.B) { next(b, "false") })
	b.Run("warm", func(b *testing.B) { next(b, "true") })
}

// FirstText runs b.N turns, each started by start, timing each from just
// before start to the first TEXT_MESSAGE_CONTENT a follower of r
// receives; it reports the median as first-ms. Call it after the thread's
// first turn, with the timer reset here.
func FirstText(b *testing.B, ctx context.Context, r *run.Runner, start func() store.Run) {
	b.Helper()
	var ms []float64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ms = append(ms, TimeFirstText(b, ctx, r, start))
	}
	b.StopTimer()
	b.ReportMetric(testutil.Median(ms), "first-ms")
}

// TimeFirstText starts one turn with start and follows it to its end; it
// returns the milliseconds from just before start to the first
// TEXT_MESSAGE_CONTENT a follower of r receives.
func TimeFirstText(b *testing.B, ctx context.Context, r *run.Runner, start func() store.Run) float64 {
	b.Helper()
	t0 := time.Now()
	rec := start()
	var got time.Duration
	err := r.Follow(ctx, rec.ID, 0, func(e store.Event) error {
		if ev, err := event.Unmarshal(e.Data); err == nil && ev.Type == event.TextMessageContent && got == 0 {
			got = time.Since(t0)
		}
		return nil
	})
	if err != nil || got == 0 {
		b.Fatalf("run %s: no text (%v)", rec.ID, err)
	}
	return float64(got.Microseconds()) / 1000
}

// ModelFloor posts body to url b.N times with header and times each until
// a streamed line contains marker (the first text delta); it reports the
// median as first-ms.
func ModelFloor(b *testing.B, url, body string, header http.Header, marker string) {
	b.Helper()
	var ms []float64
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, url, strings.NewReader(body))
		req.Header = header.Clone()
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() && !strings.Contains(sc.Text(), marker) {
		}
		ms = append(ms, float64(time.Since(t0).Microseconds())/1000)
		resp.Body.Close()
	}
	b.ReportMetric(testutil.Median(ms), "first-ms")
}
