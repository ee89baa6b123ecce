package codex_test

import (
	"net/http"
	"testing"

	"github.com/d10ffeed/corral/harness/codex"
	"github.com/d10ffeed/corral/internal/fakemodel"
	"github.com/d10ffeed/corral/internal/turntest"
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
	turntest.NextTurn(b, func(b *testing.B) {
		srv := fakemodel.New(b, fakemodel.Say("hi"))
		body := `{"model":"` + fakemodel.ModelID + `","stream":true,"input":[{"role":"user","content":"Next."}]}`
		turntest.ModelFloor(b, srv.OpenAIURL()+"/responses", body, http.Header{"Authorization": {"Bearer " + canaryKey}}, "output_text.delta")
	}, func(b *testing.B, warm string) {
		w := newWarmEnv(b, fakemodel.Say("hi"))
		w.Options[codex.OptWarm] = warm
		r := w.Runner(b)
		ctx := warmCtx(b)
		if err := r.Wait(ctx, w.Start(b, ctx, r, "Hello.").ID); err != nil {
			b.Fatal(err)
		}
		turntest.FirstText(b, ctx, r, func() store.Run { return w.Start(b, ctx, r, "Next.") })
	})
}
