package run_test

// Benchmarks of durable runs on the local provider and the memory store:
//
//	go test -run '^$' -bench . ./run/
//
// FollowLatency and PollLatency report the median time from a line written
// by the agent to its event reaching a client (p50-ms); Throughput reports
// delivered lines per second; Takeover reports the time from a second
// process's attach to the first event of the remainder.

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"testing"
	"time"

	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/harness/command"
	"github.com/d10ffeed/corral/journal"
	"github.com/d10ffeed/corral/provider/local"
	"github.com/d10ffeed/corral/run"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
	"github.com/d10ffeed/corral/store/memstore"
)

func benchRunner(b *testing.B, opts run.Options) (*run.Runner, store.Store, string) {
	b.Helper()
	base := b.TempDir()
	p, err := local.New(local.Options{BaseDir: base})
	if err != nil {
		b.Fatal(err)
	}
	st := memstore.New(memstore.Options{})
	b.Cleanup(func() { st.Close() })
	def := &sandbox.Definition{ID: "d", Provider: p}
	r, err := run.New(st, []*sandbox.Definition{def}, []harness.Harness{command.Harness{}}, opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = r.Close(context.Background()) })
	return r, st, base
}

func median(ds []time.Duration) float64 {
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return float64(ds[len(ds)/2]) / float64(time.Millisecond)
}

// latency writes lines into a FIFO the agent copies to its journal and
// times each one's arrival as an event.
func latency(b *testing.B, strategy journal.Strategy) {
	fifo := filepath.Join(b.TempDir(), "in")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		b.Fatal(err)
	}
	r, _, _ := benchRunner(b, run.Options{Strategy: strategy, FlushInterval: time.Millisecond, PollInterval: 250 * time.Millisecond})
	ctx := context.Background()
	rec, err := r.Start(ctx, run.StartRequest{Definition: "d", Harness: command.Name, Args: []string{"sh", "-c", "while IFS= read -r l; do echo \"$l\"; done < " + fifo}})
	if err != nil {
		b.Fatal(err)
	}
	w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	if err != nil {
		b.Fatal(err)
	}
	arrived := make(chan struct{}, 1)
	fctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		_ = r.Follow(fctx, rec.ID, 0, func(e store.Event) error {
			if e.Type == "TEXT_MESSAGE_CONTENT" {
				arrived <- struct{}{}
			}
			return nil
		})
	}()
	var ds []time.Duration
	for b.Loop() {
		t0 := time.Now()
		if _, err := w.WriteString("x\n"); err != nil {
			b.Fatal(err)
		}
		<-arrived
		ds = append(ds, time.Since(t0))
	}
	w.Close()
	b.ReportMetric(median(ds), "p50-ms")
}

func BenchmarkFollowLatency(b *testing.B) { latency(b, journal.Follow) }
func BenchmarkPollLatency(b *testing.B)   { latency(b, journal.Poll) }

// BenchmarkThroughput runs an agent that prints 100,000 lines as fast as
// it can and reports delivered lines per second.
func BenchmarkThroughput(b *testing.B) {
	r, _, _ := benchRunner(b, run.Options{})
	ctx := context.Background()
	const n = 100000
	var total time.Duration
	for b.Loop() {
		t0 := time.Now()
		rec, err := r.Start(ctx, run.StartRequest{Definition: "d", Harness: command.Name, Args: []string{"seq", "1", "100000"}})
		if err != nil {
			b.Fatal(err)
		}
		lines := 0
		if err := r.Follow(ctx, rec.ID, 0, func(e store.Event) error {
			if e.Type == "TEXT_MESSAGE_CONTENT" {
				lines++
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
		total += time.Since(t0)
		if lines != n {
			b.Fatalf("delivered %d lines", lines)
		}
		_ = r.Wait(ctx, rec.ID)
	}
	b.ReportMetric(float64(n)*float64(b.N)/total.Seconds(), "lines/s")
}

// BenchmarkTakeover detaches a running run and times a second runner's
// attach until the first event of the remainder.
func BenchmarkTakeover(b *testing.B) {
	base := b.TempDir()
	p, err := local.New(local.Options{BaseDir: base})
	if err != nil {
		b.Fatal(err)
	}
	st := memstore.New(memstore.Options{})
	defer st.Close()
	def := &sandbox.Definition{ID: "d", Provider: p}
	mk := func() *run.Runner {
		r, err := run.New(st, []*sandbox.Definition{def}, []harness.Harness{command.Harness{}}, run.Options{})
		if err != nil {
			b.Fatal(err)
		}
		return r
	}
	ctx := context.Background()
	var ds []time.Duration
	for b.Loop() {
		a, c := mk(), mk()
		rec, err := a.Start(ctx, run.StartRequest{Definition: "d", Harness: command.Name, Args: []string{"sh", "-c", "for i in $(seq 1 2000); do echo $i; done; sleep 0.3; echo after"}})
		if err != nil {
			b.Fatal(err)
		}
		fctx, stop := context.WithCancel(ctx)
		_ = a.Follow(fctx, rec.ID, 0, func(e store.Event) error {
			if e.Seq >= 1000 {
				stop()
			}
			return nil
		})
		stop()
		if err := a.Detach(ctx, rec.ID); err != nil {
			b.Fatal(err)
		}
		stored, _ := st.LastSeq(ctx, rec.ID)
		t0 := time.Now()
		first := time.Duration(0)
		if err := c.Attach(ctx, rec.ID, stored, func(e store.Event) error {
			if first == 0 {
				first = time.Since(t0)
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
		ds = append(ds, first)
		_ = c.Close(ctx)
		_ = a.Close(ctx)
	}
	b.ReportMetric(median(ds), "p50-ms")
}
