package sqlitestore

// Prepared statements, cached by their text: SQLite parses a statement
// each time it is given as text (modernc's driver prepares, runs and
// finalizes), which was a seventh of the daemon's CPU under load. The
// statements are few (the dynamic ones — a patch's SET clause, a batch
// of N event rows — have a bounded number of forms), and a cache that is
// full runs further ones as text.

import (
	"context"
	"database/sql"
	"errors"
	"sync"
)

// maxStmts caps each cache.
const maxStmts = 512

// writeConn is the writer's connection with its statement cache; only the
// writer goroutine uses it.
type writeConn struct {
	c     *sql.Conn
	cache map[string]*sql.Stmt
	off   bool // run every statement as text (a test's comparison)
}

var _ conn = (*writeConn)(nil)

func newWriteConn(c *sql.Conn) *writeConn {
	return &writeConn{c: c, cache: make(map[string]*sql.Stmt)}
}

// stmt returns query prepared on the connection, or nil when it cannot be
// (the cache is full, or preparing failed: the text run then says why).
func (w *writeConn) stmt(ctx context.Context, query string) *sql.Stmt {
	if st, ok := w.cache[query]; ok {
		return st
	}
	if w.off || len(w.cache) >= maxStmts {
		return nil
	}
	st, err := w.c.PrepareContext(ctx, query)
	if err != nil {
		return nil
	}
	w.cache[query] = st
	return st
}

func (w *writeConn) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if st := w.stmt(ctx, query); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return w.c.ExecContext(ctx, query, args...)
}

func (w *writeConn) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if st := w.stmt(ctx, query); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return w.c.QueryContext(ctx, query, args...)
}

func (w *writeConn) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if st := w.stmt(ctx, query); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return w.c.QueryRowContext(ctx, query, args...)
}

// close closes the cached statements and the connection.
func (w *writeConn) close() error {
	var errs []error
	for _, st := range w.cache {
		errs = append(errs, st.Close())
	}
	clear(w.cache)
	return errors.Join(append(errs, w.c.Close())...)
}

// readStmts caches statements prepared on the reading pool: a *sql.Stmt of
// a DB prepares itself once per connection that runs it, and may be used
// by many goroutines at once.
type readStmts struct {
	db    *sql.DB
	mu    sync.Mutex
	cache map[string]*sql.Stmt
	off   bool // run every statement as text (a test's comparison)
}

var _ conn = (*readStmts)(nil)

// cached returns query's statement if it is prepared already.
func (r *readStmts) cached(query string) *sql.Stmt {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cache[query]
}

// stmt returns query's statement, preparing it if needed. It never holds
// the lock while it prepares: preparing takes a connection of the pool,
// and a transaction that holds the last one may be asking for the lock.
func (r *readStmts) stmt(ctx context.Context, query string) *sql.Stmt {
	r.mu.Lock()
	st, ok := r.cache[query]
	full := r.off || len(r.cache) >= maxStmts
	r.mu.Unlock()
	if ok || full {
		return st
	}
	st, err := r.db.PrepareContext(ctx, query)
	if err != nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if prev, ok := r.cache[query]; ok { // prepared meanwhile by another
		_ = st.Close()
		return prev
	}
	if r.cache == nil {
		r.cache = make(map[string]*sql.Stmt)
	}
	r.cache[query] = st
	return st
}

func (r *readStmts) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if st := r.stmt(ctx, query); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return r.db.ExecContext(ctx, query, args...)
}

func (r *readStmts) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if st := r.stmt(ctx, query); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return r.db.QueryContext(ctx, query, args...)
}

func (r *readStmts) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if st := r.stmt(ctx, query); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return r.db.QueryRowContext(ctx, query, args...)
}

// inTx is the cached statements bound to one read transaction. It only
// uses statements prepared already (binding one to the transaction's
// connection needs no other): preparing one would wait for a second
// connection while the transaction holds its own. Open prepares those
// that ReadEvents runs.
type inTx struct {
	r  *readStmts
	tx *sql.Tx
}

func (t inTx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if st := t.r.cached(query); st != nil {
		return t.tx.StmtContext(ctx, st).ExecContext(ctx, args...)
	}
	return t.tx.ExecContext(ctx, query, args...)
}

func (t inTx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if st := t.r.cached(query); st != nil {
		return t.tx.StmtContext(ctx, st).QueryContext(ctx, args...)
	}
	return t.tx.QueryContext(ctx, query, args...)
}

func (t inTx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if st := t.r.cached(query); st != nil {
		return t.tx.StmtContext(ctx, st).QueryRowContext(ctx, args...)
	}
	return t.tx.QueryRowContext(ctx, query, args...)
}

// close closes the cached statements.
func (r *readStmts) close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var errs []error
	for _, st := range r.cache {
		errs = append(errs, st.Close())
	}
	clear(r.cache)
	return errors.Join(errs...)
}
