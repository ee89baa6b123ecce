package claudecode_test

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/harness/claudecode"
	"github.com/d10ffeed/corral/internal/fakemodel"
	"github.com/d10ffeed/corral/internal/testutil"
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
	b.ReportMetric(testutil.Median(ms), "first-ms")
}
