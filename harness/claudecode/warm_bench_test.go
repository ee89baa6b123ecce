package claudecode_test

import (
	"bufio"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/d10ffeed/corral/harness/claudecode"
	"github.com/d10ffeed/corral/internal/fakemodel"
	"github.com/d10ffeed/corral/internal/testutil"
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

// BenchmarkWarmTurnFloor is the raw floor of a warm next turn: the
// keeper corral started for a thread, driven directly, the turn's
// stream-json line written into its FIFO and its session log read (polled
// every 100 µs) to the first text delta (first-ms, median).
// BenchmarkNextTurn/warm minus this is corral's part of a warm turn (the
// start, the turn client, the journal, the store and the follower):
//
//	go test -run '^$' -bench 'NextTurn/warm|WarmTurnFloor' -benchtime 10x ./harness/claudecode/
func BenchmarkWarmTurnFloor(b *testing.B) {
	w := newWarmEnv(b, fakemodel.Say("hi"))
	w.Options[claudecode.OptWarm] = "true"
	r := w.Runner(b)
	ctx := testCtx(b)
	if err := r.Wait(ctx, w.Start(b, ctx, r, "Hello.").ID); err != nil {
		b.Fatal(err)
	}
	dirs, _ := filepath.Glob(filepath.Join(w.Journals, claudecode.WarmDirPrefix+"*"))
	if len(dirs) != 1 {
		b.Fatalf("keeper directories: %v", dirs)
	}
	in, err := os.OpenFile(filepath.Join(dirs[0], "in"), os.O_RDWR, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer in.Close()
	log, err := os.Open(filepath.Join(dirs[0], "log"))
	if err != nil {
		b.Fatal(err)
	}
	defer log.Close()
	if _, err := log.Seek(0, io.SeekEnd); err != nil {
		b.Fatal(err)
	}
	lines := bufio.NewReaderSize(log, 1<<20)
	turn := func() (first time.Duration) {
		t0 := time.Now()
		if _, err := io.WriteString(in, `{"type":"user","message":{"role":"user","content":[{"type":"text","text":"Next."}]}}`+"\n"); err != nil {
			b.Fatal(err)
		}
		var line strings.Builder
		for {
			l, err := lines.ReadString('\n')
			line.WriteString(l)
			if err == io.EOF {
				// The log is a regular file: polled. A hang guard, not a verdict.
				if time.Since(t0) > time.Minute {
					all, _ := os.ReadFile(filepath.Join(dirs[0], "log"))
					errs, _ := os.ReadFile(filepath.Join(dirs[0], "err"))
					b.Fatalf("no result line in a minute; the log ends %s; stderr %s", all[max(0, len(all)-1500):], errs)
				}
				time.Sleep(100 * time.Microsecond)
				continue
			}
			if err != nil {
				b.Fatal(err)
			}
			whole := line.String()
			line.Reset()
			if first == 0 && strings.Contains(whole, `"text_delta"`) {
				first = time.Since(t0)
			}
			// The relay's test (turnClient): a result line, not a streamed event.
			if strings.Contains(whole, `"type":"result"`) && !strings.HasPrefix(whole, `{"type":"stream_event"`) {
				return first
			}
		}
	}
	var ms []float64
	b.ResetTimer()
	for range b.N {
		ms = append(ms, float64(turn().Microseconds())/1000)
	}
	b.StopTimer()
	b.ReportMetric(testutil.Median(ms), "first-ms")
}

// BenchmarkSecondTurn times a warm thread's second and third turns, each
// iteration a new thread whose first turn (untimed) starts its keeper:
// the case bench/peer's next-turn row measures. The second turn is the
// CLI's first on a prompt read while running (second-ms, median); the
// third (third-ms) is closer to BenchmarkNextTurn/warm's steady state:
//
//	go test -run '^$' -bench SecondTurn -benchtime 8x ./harness/claudecode/
func BenchmarkSecondTurn(b *testing.B) {
	w := newWarmEnv(b, fakemodel.Say("hi"))
	w.Options[claudecode.OptWarm] = "true"
	r := w.Runner(b)
	ctx := testCtx(b)
	var second, third []float64
	for i := range b.N {
		th := "second-" + strconv.Itoa(i)
		if err := r.Wait(ctx, w.StartIn(b, ctx, r, th, "Hello.").ID); err != nil {
			b.Fatal(err)
		}
		second = append(second, turntest.TimeFirstText(b, ctx, r, func() store.Run { return w.StartIn(b, ctx, r, th, "Next.") }))
		third = append(third, turntest.TimeFirstText(b, ctx, r, func() store.Run { return w.StartIn(b, ctx, r, th, "Again.") }))
	}
	b.ReportMetric(testutil.Median(second), "second-ms")
	b.ReportMetric(testutil.Median(third), "third-ms")
}
