package claudecode_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/harness/claudecode"
	"github.com/d10ffeed/corral/internal/fakemodel"
	"github.com/d10ffeed/corral/run"
	"github.com/d10ffeed/corral/store"
)

// BenchmarkNextTurn times a thread's next Claude Code turn on the local
// provider, from Start to the first text event a follower receives
// (first-ms, median), cold (a new CLI with --resume) and warm (option
// warm=true: the thread's keeper takes the prompt), beside the fake
// model's own latency to its first text delta (floor):
//
//	go test -run '^$' -bench NextTurn -benchtime 10x ./harness/claudecode/
func BenchmarkNextTurn(b *testing.B) {
	b.Run("floor", benchModelFloor)
	for _, warm := range []string{"false", "true"} {
		name := map[string]string{"false": "cold", "true": "warm"}[warm]
		b.Run(name, func(b *testing.B) { benchNextTurn(b, warm) })
	}
}

// BenchmarkFirstTurn times a thread's first Claude Code turn the same way
// (a new thread per iteration, each turn run to its end), cold (the CLI
// started for the turn) and warm (a keeper started for the thread, which
// must not make the first turn slower than cold), beside the floor:
//
//	go test -run '^$' -bench FirstTurn -benchtime 6x ./harness/claudecode/
func BenchmarkFirstTurn(b *testing.B) {
	b.Run("floor", benchModelFloor)
	for _, warm := range []string{"false", "true"} {
		name := map[string]string{"false": "cold", "true": "warm"}[warm]
		b.Run(name, func(b *testing.B) { benchFirstTurn(b, warm) })
	}
}

func benchFirstTurn(b *testing.B, warm string) {
	w := newWarmEnv(b, fakemodel.Say("hi"))
	w.opts[claudecode.OptWarm] = warm
	r := w.runner(b)
	ctx := testCtx(b)
	var ms []float64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		rec := w.startIn(b, ctx, r, fmt.Sprintf("first-%d", i), "Hello.")
		ms = append(ms, firstText(b, ctx, r, rec.ID, t0))
		if err := r.Wait(ctx, rec.ID); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(median(ms), "first-ms")
}

// firstText follows the run to its end and returns the milliseconds from
// t0 to its first text event.
func firstText(b *testing.B, ctx context.Context, r *run.Runner, id string, t0 time.Time) float64 {
	b.Helper()
	var got time.Duration
	err := r.Follow(ctx, id, 0, func(e store.Event) error {
		if ev, err := event.Unmarshal(e.Data); err == nil && ev.Type == event.TextMessageContent && got == 0 {
			got = time.Since(t0)
		}
		return nil
	})
	if err != nil || got == 0 {
		b.Fatalf("run %s: no text (%v)", id, err)
	}
	return float64(got.Microseconds()) / 1000
}

func benchNextTurn(b *testing.B, warm string) {
	w := newWarmEnv(b, fakemodel.Say("hi"))
	w.opts[claudecode.OptWarm] = warm
	r := w.runner(b)
	ctx := testCtx(b)
	first := w.start(b, ctx, r, "Hello.")
	if err := r.Wait(ctx, first.ID); err != nil {
		b.Fatal(err)
	}
	var ms []float64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		rec := w.start(b, ctx, r, "Next.")
		ms = append(ms, firstText(b, ctx, r, rec.ID, t0))
	}
	b.StopTimer()
	b.ReportMetric(median(ms), "first-ms")
}

func benchModelFloor(b *testing.B) {
	srv := fakemodel.New(b, fakemodel.Say("hi"))
	body := `{"model":"claude-sonnet-4-5","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"Next."}]}`
	var ms []float64
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, srv.URL+"/v1/messages", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Api-Key", "sk-ant-fake")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() && !strings.Contains(sc.Text(), "text_delta") {
		}
		ms = append(ms, float64(time.Since(t0).Microseconds())/1000)
		resp.Body.Close()
	}
	b.ReportMetric(median(ms), "first-ms")
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	sort.Float64s(v)
	return v[len(v)/2]
}
