package sqlitestore

import "context"

// HoldWriter occupies the writer with a write that waits until release is
// called, so that the writes sent meanwhile queue and form the next batch.
// It returns once the writer runs the holding write.
func HoldWriter(s *Store) (release func()) {
	running, hold := make(chan struct{}), make(chan struct{})
	go func() {
		_ = s.submit(context.Background(), func(context.Context, conn) error {
			close(running)
			<-hold
			return nil
		})
	}()
	<-running
	return func() { close(hold) }
}

// Waiting returns how many writes wait to be handed to the writer.
func Waiting(s *Store) int64 { return s.stats.waiting.Load() }

// WriteSQL runs statements as one write of a batch, then returns fail (so
// that a non-nil fail rolls the statements back to the write's savepoint).
func WriteSQL(ctx context.Context, s *Store, fail error, statements ...string) error {
	return s.write(ctx, "test", "", func(ctx context.Context, c conn) error {
		for _, q := range statements {
			if _, err := c.ExecContext(ctx, q); err != nil {
				return err
			}
		}
		return fail
	})
}

// NoStatementCache makes a fresh store run every statement as text, as
// before the caches (for a comparison).
func NoStatementCache(s *Store) {
	s.r.mu.Lock()
	s.r.off = true
	s.r.mu.Unlock()
	release := HoldWriter(s) // the writer's fields are its goroutine's
	s.wconn.off = true
	release()
}

// SynchronousModes returns PRAGMA synchronous as the writer's connection
// and a reading connection see it (0 OFF, 1 NORMAL, 2 FULL).
func SynchronousModes(ctx context.Context, s *Store) (writer, reader int, err error) {
	err = s.submit(ctx, func(ctx context.Context, c conn) error {
		return c.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&writer)
	})
	if err == nil {
		err = s.rdb.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&reader)
	}
	return writer, reader, err
}
