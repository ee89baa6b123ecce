package local

import (
	"io"
	"os"
	"sync/atomic"
	"testing"
	"time"
)

// fakeAfter hands out timer channels the test fires by hand, and tells the
// test each time the code under test asks for one.
type fakeAfter struct {
	asked chan chan time.Time
}

func (f *fakeAfter) after(time.Duration) <-chan time.Time {
	c := make(chan time.Time, 1)
	f.asked <- c
	return c
}

// TestDrainKeepsUnreadOutput is the loaded machine: the command exited
// with its output still in the pipe and the reader not yet scheduled. The
// drain must not close the pipe (which loses the output) while bytes wait
// in it; with no bytes waiting (a background child holding the pipe open)
// it closes; and it gives up at maxDrain.
func TestDrainKeepsUnreadOutput(t *testing.T) {
	for _, tt := range []struct {
		name       string
		data       int  // bytes the exited command left in the pipe
		holdWriter bool // a background child keeps the write end open
		neverRead  bool // the reader never reads (a child writing without end)
		wantClosed bool
		wantTicks  int
	}{
		{name: "output waits for a slow reader", data: 4096, wantTicks: 3},
		{name: "background child holds the pipe", holdWriter: true, wantClosed: true, wantTicks: 1},
		{name: "unread for ever", data: 10, holdWriter: true, neverRead: true, wantClosed: true, wantTicks: int(maxDrain / pipeDrain)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { r.Close(); w.Close() })
			if _, err := w.Write(make([]byte, tt.data)); err != nil {
				t.Fatal(err)
			}
			if !tt.holdWriter {
				w.Close()
			}
			gate := make(chan struct{})
			done := make(chan struct{})
			var got atomic.Int64
			go func() {
				defer close(done)
				if !tt.neverRead {
					<-gate
				}
				n, _ := io.Copy(io.Discard, r)
				got.Store(n)
			}()
			fa := &fakeAfter{asked: make(chan chan time.Time)}
			var closed atomic.Int32
			finished := make(chan struct{})
			go func() {
				defer close(finished)
				drainAfterExit(fa.after, []<-chan struct{}{done}, func() int {
					if tt.neverRead {
						return 1 // bytes keep arriving
					}
					return pending(r)
				}, func() { closed.Add(1); r.Close() })
			}()
			// Fire wantTicks timers, each once the code asked for it. In
			// the slow-reader case the reader is let go (and finishes)
			// before the last asked timer would fire: the drain must then
			// end by itself, the pipe never closed under unread bytes.
			ticks := 0
			for tick := range fa.asked {
				if ticks == tt.wantTicks {
					if tt.wantClosed {
						t.Fatalf("asked for a timer after %d ticks", ticks)
					}
					close(gate)
					break
				}
				if ticks == tt.wantTicks-1 && tt.wantClosed && !tt.neverRead {
					close(gate) // read after the close: EOF or an error
				}
				ticks++
				tick <- time.Time{}
				if ticks == tt.wantTicks && tt.wantClosed {
					break
				}
			}
			<-finished
			select {
			case <-fa.asked:
				t.Fatal("asked for another timer")
			default:
			}
			if c := closed.Load() > 0; c != tt.wantClosed {
				t.Errorf("closed the pipe: %v, want %v", c, tt.wantClosed)
			}
			if !tt.holdWriter && got.Load() != int64(tt.data) {
				t.Errorf("read %d of %d bytes the command left", got.Load(), tt.data)
			}
			t.Logf("%s: %d ticks, closed %v, %d of %d bytes read", tt.name, ticks, closed.Load() > 0, got.Load(), tt.data)
		})
	}
}
