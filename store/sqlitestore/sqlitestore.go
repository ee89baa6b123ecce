// Package sqlitestore is corral's embedded default store.Store: one SQLite
// file, through modernc.org/sqlite (pure Go, no cgo).
//
// Within a process, every write goes through one writer goroutine that
// commits in groups (see writer.go): the writes queued while a transaction
// ran form the next one, each in its own savepoint, with one COMMIT.
//
// Several processes on one machine may open the same file at once: the
// database runs in WAL mode with a busy timeout, every write transaction
// starts with BEGIN IMMEDIATE (so two writers queue instead of failing on
// an upgrade), and the Locker keeps its leases and fencing tokens in a
// table of the same file, with expiry by time. The file must be on a local
// file system: SQLite's locking is not reliable over network file systems,
// and machines that share state should share a PostgreSQL (store/pgstore).
//
// The schema is created and upgraded by embedded, versioned migrations,
// applied once each under SQLite's write lock when Open runs.
package sqlitestore

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"modernc.org/sqlite"

	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
	"github.com/d10ffeed/corral/store/internal/lease"
	"github.com/d10ffeed/corral/store/internal/migrate"
	"github.com/d10ffeed/corral/store/internal/storeutil"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// Options configures Open.
type Options struct {
	// Logger receives migration notes and lease warnings; nil discards them.
	Logger *slog.Logger
	// BusyTimeout is how long a statement waits for another connection's
	// (or process's) write lock before failing with Unavailable; 0 means
	// 10 seconds.
	BusyTimeout time.Duration
	// MaxOpenConns caps the pool of reading connections; 0 means 8.
	// Writes go through one connection of their own, owned by the
	// writer goroutine: SQLite lets one writer in at a time, and writers
	// racing for the file's lock back off in sleeps of up to 100 ms
	// (other processes still meet the busy timeout).
	MaxOpenConns int
	// Synchronous is SQLite's synchronous setting: "normal" (the default:
	// the write-ahead log is synced at checkpoints only, so a power loss
	// or OS crash may lose the last commits, never the database's
	// consistency; a crash of corral alone loses nothing) or "full" (a
	// COMMIT returns once the log is on disk, so nothing answered is lost
	// even on power loss, at about ten times the cost of each COMMIT,
	// which is what bounds the embedded store's writes per second and a
	// short run's latency). A run's journal in its sandbox outlives a lost
	// commit: a takeover re-reads it and appends what the log lacks.
	Synchronous string
	// Now is the clock by which checkpoint writer leases expire and
	// checkpoints without a CreatedAt are stamped; nil means time.Now.
	// Every handle on one file should use the same clock.
	Now func() time.Time
}

// Store is a store.Store on one SQLite file.
type Store struct {
	db     *sql.DB   // the one writing connection (migrations, then the writer's)
	rdb    *sql.DB   // reading connections: queries only, deferred transactions
	r      readStmts // rdb's prepared statements
	path   string
	log    *slog.Logger
	clock  func() time.Time // Options.Now; nil = time.Now
	busy   time.Duration    // Options.BusyTimeout, defaulted
	leases lease.Registry
	closed atomic.Bool

	// The writer (writer.go): it owns wconn and takes writes from ops.
	wconn      *writeConn
	ops        chan *writeOp
	quit       chan struct{}
	writerDone chan struct{}
	stats      writeStats
}

var _ store.Store = (*Store)(nil)

// Open opens (creating if needed) the database at path and brings its
// schema up to date. The path's directory must exist.
func Open(ctx context.Context, path string, opts Options) (*Store, error) {
	const op = storeutil.OpOpen
	if path == "" || strings.ContainsRune(path, 0) {
		return nil, sandbox.Errorf(sandbox.InvalidArgument, op, path, "sqlite: invalid database path")
	}
	if path == ":memory:" || strings.HasPrefix(path, "file:") {
		return nil, sandbox.Errorf(sandbox.InvalidArgument, op, path,
			"sqlite: give a file path (an in-memory SQLite database is per connection; use the memory store instead)")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, sandbox.Wrap(sandbox.InvalidArgument, op, path, err)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	busy := opts.BusyTimeout
	if busy <= 0 {
		busy = 10 * time.Second
	}
	conns := opts.MaxOpenConns
	if conns <= 0 {
		conns = 8
	}
	var syncMode string
	switch strings.ToLower(opts.Synchronous) {
	case "full":
		syncMode = "FULL"
	case "", "normal":
		syncMode = "NORMAL"
	default:
		return nil, sandbox.Errorf(sandbox.InvalidArgument, op, path, "sqlite: synchronous %q: want full or normal", opts.Synchronous)
	}
	dsn := func(write bool) string {
		q := url.Values{}
		q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busy.Milliseconds()))
		q.Add("_pragma", "journal_mode(WAL)")
		q.Add("_pragma", "foreign_keys(1)")
		q.Add("_pragma", "synchronous("+syncMode+")")
		if write {
			q.Set("_txlock", "immediate")
		} else {
			q.Add("_pragma", "query_only(1)")
			q.Set("_txlock", "deferred")
		}
		return "file:" + (&url.URL{Path: filepath.ToSlash(abs)}).EscapedPath() + "?" + q.Encode()
	}
	db, err := sql.Open("sqlite", dsn(true))
	if err != nil {
		return nil, wrapErr(ctx, op, path, err)
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	s := &Store{db: db, path: abs, log: log, clock: opts.Now, busy: busy}
	if err := s.migrate(ctx); err != nil {
		db.Close()
		return nil, err
	}
	// The readers open after the migrations: query_only connections cannot
	// switch a new file to WAL.
	rdb, err := sql.Open("sqlite", dsn(false))
	if err != nil {
		db.Close()
		return nil, wrapErr(ctx, op, path, err)
	}
	rdb.SetMaxOpenConns(conns)
	rdb.SetMaxIdleConns(conns)
	s.rdb = rdb
	s.r.db = rdb
	for _, q := range []string{logStateSQL, readEventsSQL, readEventsLimitSQL} {
		s.r.stmt(ctx, q)
	}
	if err := s.startWriter(ctx); err != nil {
		rdb.Close()
		db.Close()
		return nil, err
	}
	return s, nil
}

// Path returns the absolute path of the database file.
func (s *Store) Path() string { return s.path }

// Close releases the leases this store holds and closes the database.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.leases.ReleaseAll(5 * time.Second)
	werr := s.stopWriter()
	rerr := errors.Join(s.r.close(), s.rdb.Close())
	return wrapErr(context.Background(), storeutil.OpClose, s.path, errors.Join(werr, s.db.Close(), rerr))
}

func (s *Store) check(op, id string) error {
	if s.closed.Load() {
		return sandbox.Errorf(sandbox.FailedPrecondition, op, id, "store is closed")
	}
	return nil
}

// --- errors ------------------------------------------------------------------

// SQLite primary and extended result codes used below.
const (
	sqlitePerm       = 3
	sqliteBusy       = 5
	sqliteLocked     = 6
	sqliteReadOnly   = 8
	sqliteInterrupt  = 9
	sqliteFull       = 13
	sqliteCantOpen   = 14
	sqliteConstraint = 19
	sqliteAuth       = 23
	constraintPK     = sqliteConstraint | 6<<8
	constraintUnique = sqliteConstraint | 8<<8
)

// classify maps a SQLite error to a code.
func classify(err error) sandbox.Code {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return sandbox.Internal
	}
	switch code := se.Code(); {
	case code == constraintPK || code == constraintUnique:
		return sandbox.AlreadyExists
	default:
		switch code & 0xff {
		case sqliteBusy, sqliteLocked, sqliteCantOpen:
			return sandbox.Unavailable
		case sqlitePerm, sqliteReadOnly, sqliteAuth:
			return sandbox.PermissionDenied
		case sqliteFull:
			return sandbox.ResourceExhausted
		case sqliteInterrupt:
			return sandbox.Canceled
		}
	}
	return sandbox.Internal
}

func wrapErr(ctx context.Context, op, id string, err error) error {
	if err == nil {
		return nil
	}
	return storeutil.WrapDB(ctx, classify(err), op, id, err)
}

// --- migrations --------------------------------------------------------------

func (s *Store) migrate(ctx context.Context) error {
	const op = storeutil.OpMigrate
	all, err := migrate.Load(migrationFS, "migrations")
	if err != nil {
		return sandbox.Wrap(sandbox.Internal, op, s.path, err)
	}
	// SQLite answers SQLITE_BUSY at once, without waiting out the busy
	// timeout, where waiting could deadlock: a new connection switching a
	// fresh file to WAL while another process holds the lock is one. Such
	// an answer is retried here, with backoff, until the busy timeout.
	deadline := time.Now().Add(s.busy)
	backoff := time.Millisecond
	for {
		done, err := s.migrateOne(ctx, all)
		if isBusy(err) && time.Now().Before(deadline) {
			select {
			case <-ctx.Done():
				return wrapErr(ctx, op, s.path, ctx.Err())
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 50*time.Millisecond)
			continue
		}
		if err != nil {
			return err
		}
		if done {
			return nil
		}
	}
}

// isBusy reports whether err is SQLite's SQLITE_BUSY (any extended code).
func isBusy(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code()&0xff == sqliteBusy
}

// migrateOne applies the next pending migration in its own transaction
// (BEGIN IMMEDIATE: the write lock, so a second process waits and then sees
// the new version). done reports that none was pending.
func (s *Store) migrateOne(ctx context.Context, all []migrate.Migration) (done bool, err error) {
	const op = storeutil.OpMigrate
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return false, wrapErr(ctx, op, s.path, err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS corral_schema_migrations (
		version    INTEGER PRIMARY KEY,
		name       TEXT NOT NULL,
		applied_at INTEGER NOT NULL
	)`); err != nil {
		return false, wrapErr(ctx, op, s.path, err)
	}
	var current int
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM corral_schema_migrations`).Scan(&current); err != nil {
		return false, wrapErr(ctx, op, s.path, err)
	}
	if current > len(all) {
		return false, sandbox.Errorf(sandbox.FailedPrecondition, op, s.path,
			"database schema version %d is newer than this corral knows (%d): upgrade corral", current, len(all))
	}
	pending := migrate.Pending(all, current)
	if len(pending) == 0 {
		return true, tx.Commit()
	}
	m := pending[0]
	if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
		return false, sandbox.Wrap(sandbox.Internal, op, m.Name, err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO corral_schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
		m.Version, m.Name, time.Now().UnixMilli()); err != nil {
		return false, wrapErr(ctx, op, m.Name, err)
	}
	if err := tx.Commit(); err != nil {
		return false, wrapErr(ctx, op, m.Name, err)
	}
	s.log.Info("store: applied migration", "store", "sqlite", "migration", m.Name)
	return false, nil
}

// SchemaVersion returns the version of the last applied migration.
func (s *Store) SchemaVersion(ctx context.Context) (int, error) {
	var v int
	err := s.rdb.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM corral_schema_migrations`).Scan(&v)
	return v, wrapErr(ctx, storeutil.OpMigrate, s.path, err)
}

// --- instances ---------------------------------------------------------------

// GetInstance implements store.InstanceStore.
func (s *Store) GetInstance(ctx context.Context, key string) (store.Instance, bool, error) {
	const op = storeutil.OpGetInstance
	if err := s.check(op, key); err != nil {
		return store.Instance{}, false, err
	}
	row := s.r.QueryRowContext(ctx, `SELECT `+storeutil.InstanceColumns+` FROM sandbox_instances WHERE key = ?`, key)
	in, err := storeutil.ScanInstance(row.Scan)
	if errors.Is(err, sql.ErrNoRows) {
		return store.Instance{}, false, nil
	}
	if err != nil {
		return store.Instance{}, false, wrapErr(ctx, op, key, err)
	}
	return in, true, nil
}

const instanceUpsert = `INSERT INTO sandbox_instances (` + storeutil.InstanceColumns + `)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (key) DO UPDATE SET
  provider = excluded.provider,
  provider_sandbox_id = excluded.provider_sandbox_id,
  latest_snapshot_id = excluded.latest_snapshot_id,
  thread_id = excluded.thread_id,
  latest_run_id = excluded.latest_run_id,
  definition_id = excluded.definition_id,
  tenant = excluded.tenant,
  updated_at = excluded.updated_at`

// PutInstance implements store.InstanceStore: one upsert that writes every
// column, so an omitted optional field becomes NULL.
func (s *Store) PutInstance(ctx context.Context, in store.Instance) error {
	const op = storeutil.OpPutInstance
	in, err := storeutil.NormalizeInstance(in, storeutil.Now())
	if err != nil {
		return err
	}
	if err := s.check(op, in.Key); err != nil {
		return err
	}
	query, created := instanceUpsert, in.UpdatedAt
	if !in.CreatedAt.IsZero() {
		query, created = instanceUpsert+",\n  created_at = excluded.created_at", in.CreatedAt
	}
	args := storeutil.InstanceValues(in, created)
	return s.write(ctx, op, in.Key, func(ctx context.Context, c conn) error {
		_, err := c.ExecContext(ctx, query, args...)
		return err
	})
}

// DeleteInstance implements store.InstanceStore.
func (s *Store) DeleteInstance(ctx context.Context, key string) error {
	const op = storeutil.OpDeleteInstance
	return s.write(ctx, op, key, func(ctx context.Context, c conn) error {
		_, err := c.ExecContext(ctx, `DELETE FROM sandbox_instances WHERE key = ?`, key)
		return err
	})
}

// ListInstances implements store.InstanceStore.
func (s *Store) ListInstances(ctx context.Context, f store.InstanceFilter) ([]store.Instance, error) {
	const op = storeutil.OpListInstances
	if err := storeutil.ValidateLimit(op, f.Limit); err != nil {
		return nil, err
	}
	if err := s.check(op, ""); err != nil {
		return nil, err
	}
	var where []string
	var args []any
	add := func(cond string, v any) {
		where = append(where, cond)
		args = append(args, v)
	}
	if f.Provider != "" {
		add("provider = ?", f.Provider)
	}
	if f.ThreadID != "" {
		add("thread_id = ?", f.ThreadID)
	}
	if f.Tenant != "" {
		add("tenant = ?", f.Tenant)
	}
	if !f.UpdatedBefore.IsZero() {
		add("updated_at < ?", storeutil.MS(f.UpdatedBefore))
	}
	query := `SELECT ` + storeutil.InstanceColumns + ` FROM sandbox_instances` + whereClause(where) + ` ORDER BY updated_at, key`
	if f.Limit > 0 {
		query += ` LIMIT ?`
		args = append(args, f.Limit)
	}
	rows, err := s.r.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, wrapErr(ctx, op, "", err)
	}
	defer rows.Close()
	var out []store.Instance
	for rows.Next() {
		in, err := storeutil.ScanInstance(rows.Scan)
		if err != nil {
			return nil, wrapErr(ctx, op, "", err)
		}
		out = append(out, in)
	}
	return out, wrapErr(ctx, op, "", rows.Err())
}

func whereClause(conds []string) string {
	if len(conds) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(conds, " AND ")
}

// placeholders returns "?, ?, ..." for n values.
func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}

// --- runs --------------------------------------------------------------------

// CreateRun implements store.RunStore.
func (s *Store) CreateRun(ctx context.Context, r store.Run) error {
	const op = storeutil.OpCreateRun
	r, err := storeutil.NormalizeRun(r, storeutil.Now())
	if err != nil {
		return err
	}
	vals := storeutil.RunValues(r)
	return s.write(ctx, op, r.ID, func(ctx context.Context, c conn) error {
		_, err := c.ExecContext(ctx, `INSERT INTO corral_runs (`+storeutil.RunColumns+`) VALUES (`+placeholders(len(vals))+`)`, vals...)
		return err // a duplicate id is AlreadyExists
	})
}

type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func getRun(ctx context.Context, q querier, op, id string) (store.Run, bool, error) {
	r, err := storeutil.ScanRun(q.QueryRowContext(ctx, `SELECT `+storeutil.RunColumns+` FROM corral_runs WHERE id = ?`, id).Scan)
	if errors.Is(err, sql.ErrNoRows) {
		return store.Run{}, false, nil
	}
	if err != nil {
		return store.Run{}, false, wrapErr(ctx, op, id, err)
	}
	return r, true, nil
}

// GetRun implements store.RunStore.
func (s *Store) GetRun(ctx context.Context, id string) (store.Run, bool, error) {
	if err := s.check(storeutil.OpGetRun, id); err != nil {
		return store.Run{}, false, err
	}
	return getRun(ctx, &s.r, storeutil.OpGetRun, id)
}

// UpdateRun implements store.RunStore. Each patch field's presence, not its
// value, decides whether its column is in the SET clause; a cleared field
// is written as NULL.
func (s *Store) UpdateRun(ctx context.Context, id string, p store.RunPatch) (store.Run, error) {
	const op = storeutil.OpUpdateRun
	assigns, err := storeutil.PatchAssignments(id, p)
	if err != nil {
		return store.Run{}, err
	}
	var out store.Run
	err = s.write(ctx, op, id, func(ctx context.Context, tx conn) error {
		cur, ok, err := getRun(ctx, tx, op, id)
		if err != nil {
			return err
		}
		if !ok {
			return storeutil.RunNotFound(op, id)
		}
		if err := storeutil.CheckPatchFences(id, cur.Status, cur.DriverEpoch, p); err != nil {
			return err
		}
		sets := []string{"updated_at = ?"}
		args := []any{storeutil.MS(storeutil.Now())}
		for _, a := range assigns {
			sets = append(sets, a.Col+" = ?")
			args = append(args, a.Val)
		}
		args = append(args, id)
		out, err = storeutil.ScanRun(tx.QueryRowContext(ctx,
			`UPDATE corral_runs SET `+strings.Join(sets, ", ")+` WHERE id = ? RETURNING `+storeutil.RunColumns, args...).Scan)
		return err
	})
	return out, err
}

// ClaimRun implements store.RunStore.
func (s *Store) ClaimRun(ctx context.Context, id string, expectEpoch int64) (store.Run, error) {
	const op = storeutil.OpClaimRun
	var out store.Run
	err := s.write(ctx, op, id, func(ctx context.Context, tx conn) error {
		cur, ok, err := getRun(ctx, tx, op, id)
		if err != nil {
			return err
		}
		if !ok {
			return storeutil.RunNotFound(op, id)
		}
		if err := storeutil.CheckClaim(id, cur.Status, cur.DriverEpoch, expectEpoch); err != nil {
			return err
		}
		out, err = storeutil.ScanRun(tx.QueryRowContext(ctx,
			`UPDATE corral_runs SET driver_epoch = driver_epoch + 1, updated_at = ? WHERE id = ? AND driver_epoch = ? RETURNING `+storeutil.RunColumns,
			storeutil.MS(storeutil.Now()), id, expectEpoch).Scan)
		return err
	})
	return out, err
}

func (s *Store) queryRuns(ctx context.Context, op, query string, args ...any) ([]store.Run, error) {
	rows, err := s.r.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, wrapErr(ctx, op, "", err)
	}
	defer rows.Close()
	var out []store.Run
	for rows.Next() {
		r, err := storeutil.ScanRun(rows.Scan)
		if err != nil {
			return nil, wrapErr(ctx, op, "", err)
		}
		out = append(out, r)
	}
	return out, wrapErr(ctx, op, "", rows.Err())
}

func nonTerminalIn() (string, []any) {
	var args []any
	for _, st := range storeutil.NonTerminalStatuses() {
		args = append(args, string(st))
	}
	return "status IN (" + placeholders(len(args)) + ")", args
}

// ActiveRun implements store.RunStore.
func (s *Store) ActiveRun(ctx context.Context, threadID, tenant string) (store.Run, bool, error) {
	const op = storeutil.OpActiveRun
	if err := s.check(op, threadID); err != nil {
		return store.Run{}, false, err
	}
	cond, args := nonTerminalIn()
	rs, err := s.queryRuns(ctx, op, `SELECT `+storeutil.RunColumns+` FROM corral_runs
		WHERE thread_id = ? AND tenant = ? AND `+cond+` ORDER BY created_at DESC, id DESC LIMIT 1`,
		append([]any{threadID, tenant}, args...)...)
	if err != nil || len(rs) == 0 {
		return store.Run{}, false, err
	}
	return rs[0], true, nil
}

// ListRuns implements store.RunStore.
func (s *Store) ListRuns(ctx context.Context, f store.RunFilter) ([]store.Run, error) {
	const op = storeutil.OpListRuns
	if err := storeutil.ValidateLimit(op, f.Limit); err != nil {
		return nil, err
	}
	if err := storeutil.ValidateStatuses(op, f.Statuses); err != nil {
		return nil, err
	}
	if err := s.check(op, ""); err != nil {
		return nil, err
	}
	var where []string
	var args []any
	if f.ThreadID != "" {
		where, args = append(where, "thread_id = ?"), append(args, f.ThreadID)
	}
	if f.Tenant != "" {
		where, args = append(where, "tenant = ?"), append(args, f.Tenant)
	}
	if len(f.Statuses) > 0 {
		where = append(where, "status IN ("+placeholders(len(f.Statuses))+")")
		for _, st := range f.Statuses {
			args = append(args, string(st))
		}
	}
	if !f.UpdatedBefore.IsZero() {
		where, args = append(where, "updated_at < ?"), append(args, storeutil.MS(f.UpdatedBefore))
	}
	query := `SELECT ` + storeutil.RunColumns + ` FROM corral_runs` + whereClause(where) + ` ORDER BY created_at, id`
	if f.Limit > 0 {
		query, args = query+` LIMIT ?`, append(args, f.Limit)
	}
	return s.queryRuns(ctx, op, query, args...)
}

// ListReclaimable implements store.RunStore.
func (s *Store) ListReclaimable(ctx context.Context, detachedBefore time.Time, limit int) ([]store.Run, error) {
	const op = storeutil.OpReclaimable
	if err := storeutil.ValidateLimit(op, limit); err != nil {
		return nil, err
	}
	if err := s.check(op, ""); err != nil {
		return nil, err
	}
	cond, args := nonTerminalIn()
	query := `SELECT ` + storeutil.RunColumns + ` FROM corral_runs
		WHERE detached_since IS NOT NULL AND detached_since <= ? AND ` + cond + ` ORDER BY detached_since, id`
	args = append([]any{storeutil.MS(detachedBefore)}, args...)
	if limit > 0 {
		query, args = query+` LIMIT ?`, append(args, limit)
	}
	return s.queryRuns(ctx, op, query, args...)
}
