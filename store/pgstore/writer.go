package pgstore

// Group commit: the store's hot writes (a run's create, update, claim,
// appends and log close; a lease's acquire, renew and release; an
// instance's upsert), each one statement or a few that stand alone, go
// through one goroutine, which sends the writes queued while it was busy
// as one pgx.Batch (BEGIN, SET LOCAL lock_timeout, the writes, COMMIT):
// one round trip and one transaction, so one COMMIT, and one WAL flush,
// serves them all instead of one each. A write
// returns only after the COMMIT that holds it, so durability is unchanged
// (with synchronous_commit on, the flush is done), and statements of one
// batch see those before them, as one after another would.
//
// A statement error aborts the batch's transaction, so nothing of it
// committed: then every write of the batch runs again alone, each in its
// own transaction on a connection of its own, off the writer's goroutine,
// and only the one that fails alone sees its error. An error of the
// connection (the answer lost) reaches every write of the batch, as it
// would reach a write sent alone.
//
// One batch at a time means one write waiting on a row lock would hold up
// every other: a batch's lock_timeout is lockWait, so a batch that meets a lock held elsewhere (another
// process's transaction, a deadlock in the making) fails soon and its
// writes run alone, where the one that needs the lock waits for it without
// holding up the rest.
//
// What needs its answers before its next statement (a refused fence's
// reread, a transaction of several dependent statements) stays on the
// pool: the reread is a read, and a retry is a new write.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/d10ffeed/corral/sandbox"
)

// maxBatch caps the writes of one batch, so a batch's transaction stays
// short and its round trip small.
const maxBatch = 128

// lockWait is how long a statement of a batch waits for a row lock before
// the batch gives up and its writes run alone.
const lockWait = 200 * time.Millisecond

// batchTimeout bounds one batch's round trip (the writes run without
// their callers' cancellation: an interrupted statement would abort the
// whole batch).
const batchTimeout = time.Minute

// The states of a queued write.
const (
	opQueued    int32 = iota // handed to the writer, not started
	opTaken                  // the writer runs it: its caller waits for the answer
	opAbandoned              // its caller's context ended first: never run
)

// pgWrite is one queued write: queue adds its statements to a batch, read
// takes their results, in order, from the batch's answers. read returns
// only errors of the database or the connection; what the results mean
// (a fence refused: no row) it keeps for its caller. It may run twice
// (the batch failed, then alone): the second answer is the one that
// counts.
type pgWrite struct {
	ctx   context.Context
	queue func(b *pgx.Batch)
	read  func(br pgx.BatchResults) error
	state atomic.Int32
	done  chan error // buffered: the writer never blocks on an answer
}

// writer is the goroutine's inbox and its stop.
type writer struct {
	ops     chan *pgWrite
	quit    chan struct{}
	stopped chan struct{}
	alones  sync.WaitGroup // writes of failed batches, run again alone
	batches atomic.Int64   // batches sent (a write run again alone is a batch of its own)
	writes  atomic.Int64   // writes in them
	alone   atomic.Int64   // writes run again alone after their batch failed
}

// WriteStats counts the group-commit writer's work, for figures.
type WriteStats struct {
	// Writes is how many writes the writer sent, in Batches round trips;
	// Alone counts the writes run again on their own after a statement of
	// their batch failed.
	Writes, Batches, Alone int64
}

// WriteStats returns the writer's counts since Open.
func (s *Store) WriteStats() WriteStats {
	return WriteStats{Writes: s.w.writes.Load(), Batches: s.w.batches.Load(), Alone: s.w.alone.Load()}
}

func (s *Store) startWriter() {
	s.w = &writer{ops: make(chan *pgWrite, maxBatch), quit: make(chan struct{}), stopped: make(chan struct{})}
	go s.runWriter()
}

// stopWriter ends the goroutine; writes it had not taken, and those
// queued after, get FailedPrecondition.
func (s *Store) stopWriter() {
	close(s.w.quit)
	<-s.w.stopped
	s.w.alones.Wait()
}

// write runs one write through the writer and returns once its batch's
// COMMIT is done (or it failed). A write whose ctx ends while it is still
// queued is never run.
func (s *Store) write(ctx context.Context, queue func(b *pgx.Batch), read func(br pgx.BatchResults) error) error {
	closed := func() error { return sandbox.Errorf(sandbox.FailedPrecondition, "", "", "store is closed") }
	o := &pgWrite{ctx: ctx, queue: queue, read: read, done: make(chan error, 1)}
	select {
	case s.w.ops <- o:
	case <-ctx.Done():
		return ctx.Err()
	case <-s.w.quit:
		return closed()
	}
	select {
	case err := <-o.done:
		return err
	case <-ctx.Done():
		if o.state.CompareAndSwap(opQueued, opAbandoned) {
			return ctx.Err()
		}
		return <-o.done // taken: its batch is short, and the answer says whether it committed
	case <-s.w.stopped:
		if o.state.CompareAndSwap(opQueued, opAbandoned) {
			return closed() // left in the queue when the writer stopped
		}
		return <-o.done
	}
}

func (s *Store) runWriter() {
	defer close(s.w.stopped)
	batch := make([]*pgWrite, 0, maxBatch)
	for {
		batch = batch[:0]
		select {
		case o := <-s.w.ops:
			batch = append(batch, o)
		case <-s.w.quit:
			return
		}
	drain:
		for len(batch) < maxBatch {
			select {
			case o := <-s.w.ops:
				batch = append(batch, o)
			default:
				break drain
			}
		}
		s.sendBatch(batch)
	}
}

// sendBatch sends the batch's live writes as one pgx.Batch and answers
// each. A batch of one write goes the same way: under the lock_timeout, so
// the writer never waits long on a lock.
func (s *Store) sendBatch(batch []*pgWrite) {
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
	s.w.batches.Add(1)
	s.w.writes.Add(int64(len(live)))
	ctx, cancel := context.WithTimeout(context.Background(), batchTimeout)
	defer cancel()
	var b pgx.Batch
	b.Queue("BEGIN")
	b.Queue(lockTimeoutSQL)
	for _, o := range live {
		o.queue(&b)
	}
	b.Queue("COMMIT")
	br := s.pool.SendBatch(ctx, &b)
	_, err := br.Exec()
	if err == nil {
		_, err = br.Exec()
	}
	for _, o := range live {
		if err != nil {
			break
		}
		err = o.read(br)
	}
	if err == nil {
		_, err = br.Exec() // the COMMIT
	}
	// A failed batch leaves its connection in the aborted transaction, which
	// the pool closes rather than hand out again.
	err = errors.Join(err, br.Close())
	if err == nil {
		for _, o := range live {
			o.done <- nil
		}
		return
	}
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		for _, o := range live {
			o.done <- err // the connection's: the same answer a write alone would get
		}
		return
	}
	// A statement failed, so nothing of the batch committed: each write
	// runs again alone, at once, while the writer goes on.
	s.w.alone.Add(int64(len(live)))
	for _, o := range live {
		s.w.alones.Go(func() { o.done <- s.sendAlone(o) })
	}
}

// lockTimeoutSQL sets a batch's lock_timeout, which ends with its
// transaction.
var lockTimeoutSQL = fmt.Sprintf("SET LOCAL lock_timeout = %d", lockWait.Milliseconds())

// sendAlone runs one write as a batch of its own.
func (s *Store) sendAlone(o *pgWrite) error {
	s.w.batches.Add(1)
	s.w.writes.Add(1)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(o.ctx), batchTimeout)
	defer cancel()
	var b pgx.Batch
	o.queue(&b)
	br := s.pool.SendBatch(ctx, &b)
	err := o.read(br)
	return errors.Join(err, br.Close())
}

// execWrite runs one statement through the writer and returns its tag.
func (s *Store) execWrite(ctx context.Context, query string, args ...any) (pgconn.CommandTag, error) {
	var tag pgconn.CommandTag
	err := s.write(ctx, func(b *pgx.Batch) { b.Queue(query, args...) }, func(br pgx.BatchResults) error {
		var err error
		tag, err = br.Exec()
		return err
	})
	return tag, err
}

// queryRowWrite runs one statement that returns at most one row through
// the writer and scans it with scan; found is false when it returned none.
func (s *Store) queryRowWrite(ctx context.Context, query string, args []any, scan func(row pgx.Row) error) (found bool, err error) {
	err = s.write(ctx, func(b *pgx.Batch) { b.Queue(query, args...) }, func(br pgx.BatchResults) error {
		err := scan(br.QueryRow())
		found = err == nil
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		return err
	})
	return found, err
}
