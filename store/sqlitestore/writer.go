package sqlitestore

// Group commit: every write of a Store goes through one goroutine, which
// takes the writes queued while it was busy and runs them as one batch: one
// transaction (BEGIN IMMEDIATE), each write inside its own SAVEPOINT, one
// COMMIT, then an answer to every caller. A write returns only after the
// COMMIT that holds it (synchronous FULL), so durability is unchanged; what
// changes is that one fsync serves the whole batch instead of one write.
//
// A write that fails rolls back to its savepoint: its own changes go, the
// others' stay, and only its caller sees the error. Read-modify-write
// operations (a claim's compare-and-swap, the next event seq, a lease's
// token) stay correct because one goroutine runs them one after another on
// one connection, each seeing the changes of those before it.

import (
	"context"
	"database/sql"
	"errors"
	"sync/atomic"
	"time"

	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store/internal/storeutil"
)

// maxBatch caps the writes of one transaction, so that one batch never
// holds the file's write lock for long.
const maxBatch = 256

// conn is what a write runs its statements on: the writer's connection,
// inside the batch's transaction and the write's savepoint.
type conn interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// The states of a queued write.
const (
	opQueued    int32 = iota // handed to the writer, not started
	opTaken                  // the writer runs it: its caller waits for the answer
	opAbandoned              // its caller's context ended first: never run
)

// writeOp is one queued write.
type writeOp struct {
	ctx   context.Context
	fn    func(ctx context.Context, c conn) error
	state atomic.Int32
	done  chan error // buffered: the writer never blocks on an answer
}

// errTxLost is the cause given to the writes of a batch whose transaction
// SQLite ended on its own (after an I/O error, a full disk…): their changes
// are gone with it, so none of them committed.
var errTxLost = errors.New("sqlite: the batch's transaction was rolled back by an earlier error; nothing of it committed")

// write runs fn as one write of a batch and returns once the batch's COMMIT
// is done (or fn, or the batch, failed). fn runs with ctx's values but not
// its cancellation: a statement interrupted inside a transaction could roll
// the whole batch back. A write whose ctx ends while it is still queued is
// never run.
func (s *Store) write(ctx context.Context, op, id string, fn func(ctx context.Context, c conn) error) error {
	if err := s.check(op, id); err != nil {
		return err
	}
	return wrapErr(ctx, op, id, s.submit(ctx, fn))
}

// submit queues fn for the writer without the closed check (a lease's
// Release runs while Close releases every lease).
func (s *Store) submit(ctx context.Context, fn func(ctx context.Context, c conn) error) error {
	o := &writeOp{ctx: ctx, fn: fn, done: make(chan error, 1)}
	s.stats.waiting.Add(1)
	select {
	case s.ops <- o:
		s.stats.waiting.Add(-1)
	case <-ctx.Done():
		s.stats.waiting.Add(-1)
		return ctx.Err()
	case <-s.quit:
		s.stats.waiting.Add(-1)
		return sandbox.Errorf(sandbox.FailedPrecondition, "", "", "store is closed")
	}
	select {
	case err := <-o.done:
		return err
	case <-ctx.Done():
		if o.state.CompareAndSwap(opQueued, opAbandoned) {
			return ctx.Err()
		}
		// The writer has started it: its batch is short, and the answer
		// says whether it committed.
		return <-o.done
	}
}

// writer is the Store's one writing goroutine: it owns c until Close.
func (s *Store) writer(c *writeConn) {
	defer close(s.writerDone)
	batch := make([]*writeOp, 0, maxBatch)
	for {
		batch = batch[:0]
		select {
		case o := <-s.ops:
			batch = append(batch, o)
		case <-s.quit:
			return
		}
	drain:
		for len(batch) < maxBatch {
			select {
			case o := <-s.ops:
				batch = append(batch, o)
			default:
				break drain
			}
		}
		s.runBatch(c, batch)
	}
}

// runBatch runs the batch's writes in one transaction and answers each.
func (s *Store) runBatch(c *writeConn, batch []*writeOp) {
	live := batch[:0:0]
	for _, o := range batch {
		if !o.state.CompareAndSwap(opQueued, opTaken) {
			continue // abandoned: its caller has its answer
		}
		if err := o.ctx.Err(); err != nil {
			o.done <- err
			continue
		}
		live = append(live, o)
	}
	if len(live) == 0 {
		return
	}
	s.stats.batches.Add(1)
	s.stats.writes.Add(int64(len(live)))
	began := time.Now()
	defer func() { s.stats.busy.Add(int64(time.Since(began))) }()
	bg := context.Background()
	answer := func(errs []error) {
		for i, o := range live {
			o.done <- errs[i]
		}
	}
	errs := make([]error, len(live))
	if _, err := c.ExecContext(bg, "BEGIN IMMEDIATE"); err != nil {
		for i := range errs {
			errs[i] = err
		}
		answer(errs)
		return
	}
	for i, o := range live {
		if _, err := c.ExecContext(bg, "SAVEPOINT w"); err != nil {
			s.abort(c, live, errs, i, err)
			return
		}
		err := o.fn(context.WithoutCancel(o.ctx), c)
		if err != nil {
			errs[i] = err
			if _, rerr := c.ExecContext(bg, "ROLLBACK TO w"); rerr != nil {
				s.abort(c, live, errs, i+1, errors.Join(errTxLost, rerr))
				return
			}
		}
		if _, err := c.ExecContext(bg, "RELEASE w"); err != nil {
			s.abort(c, live, errs, i+1, errors.Join(errTxLost, err))
			return
		}
	}
	commit := time.Now()
	if _, err := c.ExecContext(bg, "COMMIT"); err != nil {
		s.abort(c, live, errs, len(live), err)
		return
	}
	s.stats.commit.Add(int64(time.Since(commit)))
	answer(errs)
}

// abort rolls the batch back after a failure that ends its transaction:
// the writes before from (that had succeeded) and from on all get cause;
// a write that failed on its own keeps its own error.
func (s *Store) abort(c *writeConn, live []*writeOp, errs []error, from int, cause error) {
	_, _ = c.ExecContext(context.Background(), "ROLLBACK") // may find none: SQLite already rolled back
	s.stats.aborted.Add(1)
	for i, o := range live {
		err := errs[i]
		if err == nil || i >= from {
			err = cause
		}
		o.done <- err
	}
}

// writeStats counts the writer's work (for tests and figures).
type writeStats struct {
	batches, writes, aborted atomic.Int64
	busy, commit             atomic.Int64 // nanoseconds
	waiting                  atomic.Int64 // writes not yet handed to the writer
}

// WriteStats reports the writer's work: how many transactions it ran
// (batches), how many writes they held, how many batches were rolled back
// whole, the time spent in batches and, of it, in COMMIT.
type WriteStats struct {
	Batches, Writes, Aborted int64
	Busy, Commit             time.Duration
}

// WriteStats returns the writer's counts so far.
func (s *Store) WriteStats() WriteStats {
	return WriteStats{
		Batches: s.stats.batches.Load(), Writes: s.stats.writes.Load(), Aborted: s.stats.aborted.Load(),
		Busy: time.Duration(s.stats.busy.Load()), Commit: time.Duration(s.stats.commit.Load()),
	}
}

// startWriter takes the writing connection from s.db and starts the writer.
func (s *Store) startWriter(ctx context.Context) error {
	c, err := s.db.Conn(ctx)
	if err != nil {
		return wrapErr(ctx, storeutil.OpOpen, s.path, err)
	}
	s.wconn = newWriteConn(c)
	s.ops = make(chan *writeOp)
	s.quit = make(chan struct{})
	s.writerDone = make(chan struct{})
	go s.writer(s.wconn)
	return nil
}

// stopWriter stops the writer once its batch is done and returns its
// connection (and its statements) to s.db.
func (s *Store) stopWriter() error {
	close(s.quit)
	<-s.writerDone
	return s.wconn.close()
}
