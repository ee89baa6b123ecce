package claudecode_test

import (
	"net/http"
	"strconv"
	"testing"

	"github.com/d10ffeed/corral/harness/claudecode"
	"github.com/d10ffeed/corral/internal/fakemodel"
	"github.com/d10ffeed/corral/internal/turntest"
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
	turntest.NextTurn(b, func(b *testing.B) {
		srv := fakemodel.New(b, fakemodel.Say("hi"))
		body := `{"model":"claude-sonnet-4-5","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"Next."}]}`
		turntest.ModelFloor(b, srv.URL+"/v1/messages", body, http.Header{"X-Api-Key": {"sk-ant-fake"}}, "text_delta")
	}, func(b *testing.B, warm string) {
		w := newWarmEnv(b, fakemodel.Say("hi"))
		w.Options[claudecode.OptWarm] = warm
		r := w.Runner(b)
		ctx := testCtx(b)
		if err := r.Wait(ctx, w.Start(b, ctx, r, "Hello.").ID); err != nil {
			b.Fatal(err)
		}
		turntest.FirstText(b, ctx, r, func() store.Run { return w.Start(b, ctx, r, "Next.") })
	})
}

// BenchmarkFirstTurn times a thread's first Claude Code turn the same way
// (a new thread per iteration), cold (the CLI started for the turn) and
// warm (a keeper started for the thread, which must not make the first
// turn slower than cold), beside the floor:
//
//	go test -run '^$' -bench FirstTurn -benchtime 6x ./harness/claudecode/
func BenchmarkFirstTurn(b *testing.B) {
	turntest.NextTurn(b, func(b *testing.B) {
		srv := fakemodel.New(b, fakemodel.Say("hi"))
		body := `{"model":"claude-sonnet-4-5","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"Hello."}]}`
		turntest.ModelFloor(b, srv.URL+"/v1/messages", body, http.Header{"X-Api-Key": {"sk-ant-fake"}}, "text_delta")
	}, func(b *testing.B, warm string) {
		w := newWarmEnv(b, fakemodel.Say("hi"))
		w.Options[claudecode.OptWarm] = warm
		r := w.Runner(b)
		ctx := testCtx(b)
		i := 0
		turntest.FirstText(b, ctx, r, func() store.Run {
			i++
			return w.StartIn(b, ctx, r, "first-"+strconv.Itoa(i), "Hello.")
		})
	})
}
