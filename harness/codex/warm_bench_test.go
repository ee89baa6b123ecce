package codex_test

import (
	"bufio"
	"context"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/harness/codex"
	"github.com/d10ffeed/corral/internal/fakemodel"
	"github.com/d10ffeed/corral/store"
)

// BenchmarkNextTurn times a thread's next codex turn on the local
// provider, from Start to the first text event a follower receives
// (first-ms, median), cold (`codex exec … resume`) and warm (option
// warm=true: the thread's app-server takes a turn/start), beside the fake
// model's own latency to its first text delta (floor):
//
//	go test -run '^$' -bench NextTurn -benchtime 10x ./harness/codex/
func BenchmarkNextTurn(b *testing.B) {
	b.Run("floor", benchModelFloor)
	for _, warm := range []string{"false", "true"} {
		name := map[string]string{"false": "cold", "true": "warm"}[warm]
		b.Run(name, func(b *testing.B) { benchNextTurn(b, warm) })
	}
}

func benchNextTurn(b *testing.B, warm string) {
	w := newWarmEnv(b, fakemodel.Say("hi"))
	w.Options[codex.OptWarm] = warm
	r := w.Runner(b)
	ctx := warmCtx(b)
	first := w.Start(b, ctx, r, "Hello.")
	if err := r.Wait(ctx, first.ID); err != nil {
		b.Fatal(err)
	}
	var ms []float64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		rec := w.Start(b, ctx, r, "Next.")
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
	b.ReportMetric(median(ms), "first-ms")
}

func benchModelFloor(b *testing.B) {
	srv := fakemodel.New(b, fakemodel.Say("hi"))
	body := `{"model":"` + fakemodel.ModelID + `","stream":true,"input":[{"role":"user","content":"Next."}]}`
	var ms []float64
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, srv.OpenAIURL()+"/responses", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+canaryKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() && !strings.Contains(sc.Text(), "output_text.delta") {
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
