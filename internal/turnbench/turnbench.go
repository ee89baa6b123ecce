// Package turnbench times agent turns for the next-turn benchmarks
// (BenchmarkNextTurn of the harnesses with warm sessions): a turn's first
// text as a follower sees it, and the fake model's own floor.
package turnbench

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
			b.Fatalf("turn %d: no text (%v)", i, err)
		}
		ms = append(ms, float64(got.Microseconds())/1000)
	}
	b.StopTimer()
	b.ReportMetric(testutil.Median(ms), "first-ms")
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
