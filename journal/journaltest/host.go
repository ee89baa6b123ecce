package journaltest

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/d10ffeed/corral/journal"
	"github.com/d10ffeed/corral/sandbox"
)

// hostAttacks: where the host strategy reads the journal's file on the
// host, the agent (the same user) replaces it with what a naive reader
// would follow, block on or swallow whole. Each case bounds the read by a
// deadline and the test by a hang guard; the verdict is what Read returned
// and how much it held, never how long it took.
func (s *suite) hostAttacks(t *testing.T) {
	for _, tc := range []struct {
		name   string
		script string
		// deadline bounds the read (a wrapper that hangs on the FIFO, a
		// journal a terabyte long, never end by themselves).
		deadline time.Duration
		check    func(t *testing.T, err error)
	}{
		// A symbolic link to a terabyte of zeros: a reader that follows
		// it reads until its deadline. Once the wrapper is gone, the
		// journal's path names no regular file: the run is lost.
		{"SymlinkToSparseFile", `echo before; printf x >big && truncate -s 1T big && ln -s "$PWD/big" "$J.l" && mv -f "$J.l" "$J"; exit 4`,
			time.Minute, func(t *testing.T, err error) {
				if !errors.Is(err, journal.ErrLost) || sandbox.CodeOf(err) != sandbox.FailedPrecondition {
					t.Errorf("got %v, want ErrLost (FailedPrecondition): the link must not be followed", err)
				}
			}},
		// A FIFO: a blocking open waits for a writer that never comes (the
		// wrapper itself hangs on it). The read must still end with its
		// context.
		{"FIFO", `echo before; mkfifo "$J.f" && mv -f "$J.f" "$J"; exit 5`,
			3 * time.Second, func(t *testing.T, err error) {
				if c := sandbox.CodeOf(err); c != sandbox.Canceled && c != sandbox.DeadlineExceeded {
					t.Errorf("got %v, want the read's deadline", err)
				}
			}},
		// The journal itself grown to a sparse terabyte: it is read in
		// bounded chunks and pieces (memory stays bounded) and the read
		// ends with its context.
		{"HugeSparseJournal", `echo before; truncate -s 1T "$J"; exit 6`,
			3 * time.Second, func(t *testing.T, err error) {
				if c := sandbox.CodeOf(err); c != sandbox.Canceled && c != sandbox.DeadlineExceeded {
					t.Errorf("got %v, want the read's deadline", err)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, h := s.sandbox(t)
			p, nonce := startAgent(t, ctx, h, func(p journal.Paths, _ string) sandbox.Command {
				return sandbox.Command{Shell: tc.script, Env: map[string]string{"J": p.Journal}}
			})
			rctx, cancel := context.WithTimeout(ctx, tc.deadline)
			defer cancel()
			var ms runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&ms)
			base, peak := ms.HeapInuse, ms.HeapInuse
			var lines, bytes int64
			type result struct {
				err error
			}
			done := make(chan result, 1)
			go func() {
				_, err := reader(h, p, nonce, hostWatched).Read(rctx, 0, func(l journal.Line) error {
					lines++
					bytes += int64(len(l.Data))
					if lines%16 == 1 {
						runtime.ReadMemStats(&ms)
						peak = max(peak, ms.HeapInuse)
					}
					return nil
				})
				done <- result{err}
			}()
			var res result
			select {
			case res = <-done:
			case <-time.After(tc.deadline + 2*time.Minute):
				t.Fatalf("the read did not end %v after its deadline (hang guard)", 2*time.Minute)
			}
			grew := int64(peak) - int64(base)
			t.Logf("read ended with %v; %d lines (%d bytes) delivered; heap grew by %.1f MiB at most", res.err, lines, bytes, float64(grew)/(1<<20))
			tc.check(t, res.err)
			if grew > 64<<20 {
				t.Errorf("the reader's heap grew by %d MiB, want under 64 MiB", grew>>20)
			}
		})
	}
}
