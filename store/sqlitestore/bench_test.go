package sqlitestore_test

import (
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/d10ffeed/corral/store"
	"github.com/d10ffeed/corral/store/sqlitestore"
)

// BenchmarkRunWrites writes what a run writes (create, claim, three
// appends, close, end, an instance, two locks) from 400 goroutines at
// once; b.N runs in all. It reports runs/s and the writer's transactions:
// prepared statements against text, and synchronous full against the
// default normal.
func BenchmarkRunWrites(b *testing.B) {
	b.Run("prepared", func(b *testing.B) { benchRunWrites(b, true, "") })
	b.Run("text", func(b *testing.B) { benchRunWrites(b, false, "") })
	b.Run("prepared-full", func(b *testing.B) { benchRunWrites(b, true, "full") })
}

func benchRunWrites(b *testing.B, prepared bool, synchronous string) {
	ctx := b.Context()
	s, err := sqlitestore.Open(ctx, filepath.Join(b.TempDir(), "corral.db"), sqlitestore.Options{Synchronous: synchronous})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if !prepared {
		sqlitestore.NoStatementCache(s)
	}
	const workers = 400
	before := s.WriteStats()
	began := time.Now()
	var wg sync.WaitGroup
	next := make(chan int)
	go func() {
		for i := range b.N {
			next <- i
		}
		close(next)
	}()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				id := fmt.Sprintf("run-%d", i)
				must := func(err error) {
					if err != nil {
						b.Error(err)
					}
				}
				must(s.CreateRun(ctx, store.Run{ID: id, ThreadID: id}))
				l, err := s.Lock(ctx, "thread/"+id, 10*time.Second)
				must(err)
				_, err = s.ClaimRun(ctx, id, 0)
				must(err)
				must(s.PutInstance(ctx, store.Instance{Key: id, Provider: "local", ProviderSandboxID: id, ThreadID: id}))
				for k := range 3 {
					must(s.AppendEvents(ctx, id, 1, int64(k+1), []store.NewEvent{{Type: "x", Data: []byte(`{"a":1}`)}}))
				}
				_, err = s.UpdateRun(ctx, id, store.RunPatch{Status: store.Set(store.RunCompleted)})
				must(err)
				must(s.CloseLog(ctx, id, 1))
				must(l.Release(ctx))
			}
		}()
	}
	wg.Wait()
	el := time.Since(began)
	w := s.WriteStats()
	n := w.Batches - before.Batches
	b.ReportMetric(float64(b.N)/el.Seconds(), "runs/s")
	b.ReportMetric(float64(w.Writes-before.Writes)/float64(max(n, 1)), "writes/txn")
	b.ReportMetric(float64((w.Busy-before.Busy).Microseconds())/1000/float64(max(n, 1)), "ms/txn")
	b.ReportMetric(float64((w.Commit-before.Commit).Microseconds())/1000/float64(max(n, 1)), "commit-ms/txn")
}
