package opencode_test

import (
	"net/http"
	"testing"

	"github.com/d10ffeed/corral/harness/opencode"
	"github.com/d10ffeed/corral/internal/fakemodel"
	"github.com/d10ffeed/corral/internal/turntest"
	"github.com/d10ffeed/corral/store"
)

// BenchmarkNextTurn times a thread's next OpenCode server-mode turn on the
// local provider, from Start to the first text event a follower receives
// (first-ms, median): cold (the client starts `opencode serve` and resumes
// the session) and warm (option warm=true: the thread's kept server takes
// the prompt), beside the fake model's own latency to its first text delta
// over the chat completions API OpenCode's provider uses (floor):
//
//	go test -run '^$' -bench NextTurn -benchtime 5x ./harness/opencode/
func BenchmarkNextTurn(b *testing.B) {
	body := `{"model":"` + fakemodel.ModelID + `","stream":true,"messages":[{"role":"user","content":"Next."}]}`
	turntest.NextTurn(b, func(b *testing.B) {
		srv := fakemodel.New(b, fakemodel.Say("hi"))
		turntest.ModelFloor(b, srv.OpenAIURL()+"/chat/completions", body, http.Header{"Authorization": {"Bearer " + canaryKey}}, `"content"`)
	}, func(b *testing.B, warm string) {
		f := newWarmFixture(b, fakemodel.Say("hi"), nil)
		ctx := testCtx(b)
		turn := func(prompt string) store.Run { return f.startTurn(b, ctx, prompt, opencode.OptWarm, warm) }
		if err := f.r.Wait(ctx, turn("Hello.").ID); err != nil {
			b.Fatal(err)
		}
		turntest.FirstText(b, ctx, f.r, func() store.Run { return turn("Next.") })
	})
}
