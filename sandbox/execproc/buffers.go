package execproc

import (
	"bytes"
	"io"
	"sync"
)

// capBuf keeps up to limit bytes (all when limit is 0) and notes the
// rest was dropped.
type capBuf struct {
	buf       bytes.Buffer
	limit     int
	truncated bool
}

func (c *capBuf) Write(b []byte) (int, error) {
	if c.limit > 0 {
		room := c.limit - c.buf.Len()
		if len(b) > room {
			c.truncated = true
			c.buf.Write(b[:max(room, 0)])
			return len(b), nil
		}
	}
	return c.buf.Write(b)
}

// spawnBuffer bounds what a spawned process's stdout or stderr holds
// while the caller has not read it. A process that writes more than that
// to one stream waits until the caller reads (or closes the stream), as it
// would on a pipe, only with a bigger buffer; on a backend whose streams
// share one connection the other stream waits with it.
const spawnBuffer = 4 << 20

// bufPipe is an in-memory pipe between the stream's copier (the writer)
// and the caller. The writer blocks while limit bytes are unread; Close
// makes the pipe drop what it is given from then on.
type bufPipe struct {
	mu      sync.Mutex
	cond    sync.Cond
	buf     bytes.Buffer
	limit   int
	closed  bool // the writer is done
	discard bool // the reader is done
	err     error
}

func newBufPipe() *bufPipe {
	b := &bufPipe{limit: spawnBuffer}
	b.cond.L = &b.mu
	return b
}

func (b *bufPipe) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for b.buf.Len() >= b.limit && !b.closed && !b.discard {
		b.cond.Wait()
	}
	if b.closed {
		return 0, io.ErrClosedPipe
	}
	if b.discard {
		return len(p), nil
	}
	b.buf.Write(p)
	b.cond.Broadcast()
	return len(p), nil
}

func (b *bufPipe) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for b.buf.Len() == 0 && !b.closed && !b.discard {
		b.cond.Wait()
	}
	if b.discard {
		return 0, io.ErrClosedPipe
	}
	if b.buf.Len() > 0 {
		n, err := b.buf.Read(p)
		b.cond.Broadcast() // room for the writer
		return n, err
	}
	return 0, b.err
}

// Close is the reader's: it will read no more, and the writer's output is
// dropped from now on so the other stream keeps flowing.
func (b *bufPipe) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.discard = true
	b.buf = bytes.Buffer{}
	b.cond.Broadcast()
	return nil
}

func (b *bufPipe) closeWithError(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	if err == nil {
		err = io.EOF
	}
	b.closed, b.err = true, err
	b.cond.Broadcast()
}
