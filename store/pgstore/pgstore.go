// Package pgstore is the store.Store for PostgreSQL, through pgx (pgxpool):
// the store that several corral processes on several machines share.
//
// Concurrency rests on the database, never on a process:
//   - a run's row is the lock of its event log: an append, a claim, an
//     update and a close are each one statement whose WHERE holds the
//     fences (the DriverEpoch among them), so the row's lock and the check
//     are one (writes.go);
//   - the hot writes go through one goroutine that sends those queued
//     meanwhile as one batch: one round trip, one transaction, one WAL
//     flush for many (writer.go);
//   - PutInstance is one INSERT ... ON CONFLICT (key) DO UPDATE that sets
//     every column, so concurrent upserts are safe and an omitted optional
//     field becomes NULL;
//   - the Locker is a lease table (name, last fencing token, expiry); every
//     expiry is computed by the database's clock (clock_timestamp()), so
//     machines whose clocks disagree still agree on who holds a lease;
//   - migrations are embedded and versioned, and run under
//     pg_advisory_xact_lock, so processes that start together apply each
//     migration once.
//
// Options.Schema confines the store to one schema (created if missing;
// every connection's search_path names it). The connection URL's password
// never appears in an error message or a log line.
package pgstore

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"net"
	neturl "net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
	"github.com/d10ffeed/corral/store/internal/lease"
	"github.com/d10ffeed/corral/store/internal/migrate"
	"github.com/d10ffeed/corral/store/internal/redact"
	"github.com/d10ffeed/corral/store/internal/storeutil"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// Options configures Open.
type Options struct {
	// Logger receives migration notes and lease warnings; nil discards them.
	Logger *slog.Logger
	// Schema, when set, is the schema that holds corral's tables: created if
	// missing and put first on every connection's search_path. Empty uses
	// the connection's own search_path (normally public).
	Schema string
	// MaxConns caps the pool; 0 means the URL's pool_max_conns, or
	// DefaultMaxConns without one.
	MaxConns int32
	// Now is the clock by which checkpoint writer leases expire and
	// checkpoints without a CreatedAt are stamped; nil means the
	// database's clock for leases (as for the Locker) and this machine's
	// for the stamps.
	Now func() time.Time
	// Tracer, when set, sees every statement the store sends (pgx's
	// QueryTracer: BEGIN and COMMIT included; a pgx.BatchTracer sees
	// batches, a pgxpool.AcquireTracer the waits for a connection), e.g. to
	// count round trips.
	Tracer pgx.QueryTracer
}

// DefaultMaxConns is the pool's cap when neither Options.MaxConns nor the
// URL's pool_max_conns sets one. pgxpool's own default, max(4, CPUs), made
// every call of a daemon with hundreds of runs wait for one of 4
// connections (p50 60 ms, reads included, at 100 runs); connections are
// opened only as needed, and PostgreSQL's default max_connections is 100.
const DefaultMaxConns = 32

// Store is a store.Store on PostgreSQL.
type Store struct {
	pool    *pgxpool.Pool
	log     *slog.Logger
	schema  string
	target  string           // the redacted URL, for messages
	secrets []string         // the URL's passwords, scrubbed from every error
	clock   func() time.Time // Options.Now; nil = the database's clock
	leases  lease.Registry
	w       *writer // the group-commit writer (writer.go)
	closed  atomic.Bool
}

var _ store.Store = (*Store)(nil)

// Open connects to the database at url (postgres:// or postgresql://, with
// any parameter pgx accepts) and brings the schema up to date. A malformed
// URL is InvalidArgument; a database that does not answer is Unavailable.
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
	const op = storeutil.OpOpen
	secrets := redact.Secrets(url)
	target := redact.URL(url)
	cfg, err := parseConfig(url)
	if err != nil {
		return nil, err
	}
	switch {
	case opts.MaxConns > 0:
		cfg.MaxConns = opts.MaxConns
	case !strings.Contains(url, "pool_max_conns="):
		cfg.MaxConns = DefaultMaxConns
	}
	if opts.Schema != "" {
		if strings.ContainsRune(opts.Schema, 0) {
			return nil, sandbox.Errorf(sandbox.InvalidArgument, op, target, "invalid schema name %q", opts.Schema)
		}
		cfg.ConnConfig.RuntimeParams["search_path"] = pgx.Identifier{opts.Schema}.Sanitize()
	}
	if opts.Tracer != nil {
		cfg.ConnConfig.Tracer = opts.Tracer
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, redact.Error(wrapErr(ctx, op, target, err), secrets)
	}
	s := &Store{pool: pool, log: log, schema: opts.Schema, target: target, secrets: secrets, clock: opts.Now}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, s.wrap(ctx, op, target, err)
	}
	if err := s.migrate(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	s.startWriter()
	return s, nil
}

// CheckURL reports whether url is a PostgreSQL connection URL pgx accepts,
// without connecting. The error is InvalidArgument and never holds the
// URL's password.
func CheckURL(url string) error {
	_, err := parseConfig(url)
	return err
}

func parseConfig(raw string) (*pgxpool.Config, error) {
	const op = storeutil.OpOpen
	target := redact.URL(raw)
	if !strings.HasPrefix(raw, "postgres://") && !strings.HasPrefix(raw, "postgresql://") {
		return nil, sandbox.Errorf(sandbox.InvalidArgument, op, target, "a PostgreSQL URL starts with postgres:// or postgresql://")
	}
	if _, err := neturl.Parse(raw); err != nil {
		// The parser's message quotes pieces of the URL, password included.
		return nil, sandbox.Errorf(sandbox.InvalidArgument, op, target,
			"invalid PostgreSQL URL: it does not parse as a URL (a bad port, or a special character in the user name or password that is not percent-encoded)")
	}
	cfg, err := pgxpool.ParseConfig(raw)
	if err != nil {
		// pgx's error keeps the unredacted URL in a field: keep only its
		// message, scrubbed.
		return nil, sandbox.Errorf(sandbox.InvalidArgument, op, target, "invalid PostgreSQL URL: %s",
			redact.Message(err.Error(), redact.Secrets(raw)))
	}
	return cfg, nil
}

// Close releases the leases this store holds and closes the pool.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.leases.ReleaseAll(5 * time.Second)
	s.stopWriter()
	s.pool.Close()
	return nil
}

func (s *Store) check(op, id string) error {
	if s.closed.Load() {
		return sandbox.Errorf(sandbox.FailedPrecondition, op, id, "store is closed")
	}
	return nil
}

// --- errors ------------------------------------------------------------------

// classify maps a pgx error to a code.
func classify(err error) sandbox.Code {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch c := pe.Code; {
		case c == "23505": // unique_violation
			return sandbox.AlreadyExists
		case c == "40001", c == "40P01": // serialization_failure, deadlock_detected
			return sandbox.Unavailable
		case c == "57014": // query_canceled
			return sandbox.Canceled
		case c == "3D000", c == "3F000": // invalid_catalog_name, invalid_schema_name
			return sandbox.NotFound
		case c == "42501", strings.HasPrefix(c, "28"): // insufficient_privilege, invalid authorization
			return sandbox.PermissionDenied
		case strings.HasPrefix(c, "53"): // insufficient_resources
			return sandbox.ResourceExhausted
		case strings.HasPrefix(c, "08"), strings.HasPrefix(c, "57P"): // connection, shutdown
			return sandbox.Unavailable
		case strings.HasPrefix(c, "22"), strings.HasPrefix(c, "23"): // data, integrity
			return sandbox.InvalidArgument
		}
		return sandbox.Internal
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	switch {
	case errors.As(err, &ce), errors.As(err, &ne), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		pgconn.SafeToRetry(err):
		return sandbox.Unavailable
	case pgconn.Timeout(err):
		return sandbox.DeadlineExceeded
	case strings.Contains(err.Error(), "closed pool"):
		return sandbox.FailedPrecondition
	}
	return sandbox.Internal
}

func wrapErr(ctx context.Context, op, id string, err error) error {
	if err == nil {
		return nil
	}
	// A connect error carries the whole configuration (password included)
	// in a field: keep its message only.
	code := classify(err)
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		if code == sandbox.Internal {
			code = sandbox.Unavailable
		}
		err = &sandbox.Error{Code: code, Op: op, ID: id, Msg: err.Error()}
	}
	return storeutil.WrapDB(ctx, code, op, id, err)
}

// wrap is wrapErr with the URL's passwords scrubbed from the message.
func (s *Store) wrap(ctx context.Context, op, id string, err error) error {
	return redact.Error(wrapErr(ctx, op, id, err), s.secrets)
}

// --- migrations --------------------------------------------------------------

// migrationLockKey is the advisory lock that serializes migrations of one
// schema across processes.
func (s *Store) migrationLockKey() int64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "corral.store.migrate:%s", s.schema)
	return int64(h.Sum64())
}

func (s *Store) migrate(ctx context.Context) error {
	const op = storeutil.OpMigrate
	all, err := migrate.Load(migrationFS, "migrations")
	if err != nil {
		return sandbox.Wrap(sandbox.Internal, op, "", err)
	}
	for {
		done, err := s.migrateOne(ctx, all)
		if err != nil {
			return err
		}
		if done {
			return nil
		}
	}
}

// migrateOne applies the next pending migration in its own transaction,
// under a transaction-scoped advisory lock: a second process waits for the
// lock, then reads the new version and finds nothing to do.
func (s *Store) migrateOne(ctx context.Context, all []migrate.Migration) (done bool, err error) {
	const op = storeutil.OpMigrate
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, s.migrationLockKey()); err != nil {
			return err
		}
		if s.schema != "" {
			if _, err := tx.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+pgx.Identifier{s.schema}.Sanitize()); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS corral_schema_migrations (
			version    INTEGER PRIMARY KEY,
			name       TEXT NOT NULL,
			applied_at BIGINT NOT NULL
		)`); err != nil {
			return err
		}
		var current int
		if err := tx.QueryRow(ctx, `SELECT COALESCE(MAX(version), 0) FROM corral_schema_migrations`).Scan(&current); err != nil {
			return err
		}
		if current > len(all) {
			return sandbox.Errorf(sandbox.FailedPrecondition, op, s.schema,
				"database schema version %d is newer than this corral knows (%d): upgrade corral", current, len(all))
		}
		pending := migrate.Pending(all, current)
		if len(pending) == 0 {
			done = true
			return nil
		}
		m := pending[0]
		if _, err := tx.Exec(ctx, m.SQL); err != nil {
			return sandbox.Wrap(sandbox.Internal, op, m.Name, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO corral_schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)`,
			m.Version, m.Name, time.Now().UnixMilli()); err != nil {
			return err
		}
		s.log.Info("store: applying migration", "store", "postgres", "schema", s.schema, "migration", m.Name)
		return nil
	})
	return done, s.wrap(ctx, op, s.schema, err)
}

// SchemaVersion returns the version of the last applied migration.
func (s *Store) SchemaVersion(ctx context.Context) (int, error) {
	var v int
	err := s.pool.QueryRow(ctx, `SELECT COALESCE(MAX(version), 0) FROM corral_schema_migrations`).Scan(&v)
	return v, s.wrap(ctx, storeutil.OpMigrate, s.schema, err)
}

// --- instances ---------------------------------------------------------------

// GetInstance implements store.InstanceStore.
func (s *Store) GetInstance(ctx context.Context, key string) (store.Instance, bool, error) {
	const op = storeutil.OpGetInstance
	if err := s.check(op, key); err != nil {
		return store.Instance{}, false, err
	}
	in, err := storeutil.ScanInstance(s.pool.QueryRow(ctx,
		`SELECT `+storeutil.InstanceColumns+` FROM sandbox_instances WHERE key = $1`, key).Scan)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Instance{}, false, nil
	}
	if err != nil {
		return store.Instance{}, false, s.wrap(ctx, op, key, err)
	}
	return in, true, nil
}

const instanceUpsert = `INSERT INTO sandbox_instances AS i (` + storeutil.InstanceColumns + `)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
ON CONFLICT (key) DO UPDATE SET
  provider = EXCLUDED.provider,
  provider_sandbox_id = EXCLUDED.provider_sandbox_id,
  latest_snapshot_id = EXCLUDED.latest_snapshot_id,
  thread_id = EXCLUDED.thread_id,
  latest_run_id = EXCLUDED.latest_run_id,
  definition_id = EXCLUDED.definition_id,
  tenant = EXCLUDED.tenant,
  updated_at = EXCLUDED.updated_at`

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
		query, created = instanceUpsert+",\n  created_at = EXCLUDED.created_at", in.CreatedAt
	}
	_, err = s.execWrite(ctx, query, storeutil.InstanceValues(in, created)...)
	return s.wrap(ctx, op, in.Key, err)
}

// DeleteInstance implements store.InstanceStore.
func (s *Store) DeleteInstance(ctx context.Context, key string) error {
	const op = storeutil.OpDeleteInstance
	if err := s.check(op, key); err != nil {
		return err
	}
	_, err := s.pool.Exec(ctx, `DELETE FROM sandbox_instances WHERE key = $1`, key)
	return s.wrap(ctx, op, key, err)
}

// args collects query arguments and hands out their placeholders.
type args []any

func (a *args) add(v any) string {
	*a = append(*a, v)
	return fmt.Sprintf("$%d", len(*a))
}

func whereClause(conds []string) string {
	if len(conds) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(conds, " AND ")
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
	var a args
	var where []string
	if f.Provider != "" {
		where = append(where, "provider = "+a.add(f.Provider))
	}
	if f.ThreadID != "" {
		where = append(where, "thread_id = "+a.add(f.ThreadID))
	}
	if f.Tenant != "" {
		where = append(where, "tenant = "+a.add(f.Tenant))
	}
	if !f.UpdatedBefore.IsZero() {
		where = append(where, "updated_at < "+a.add(storeutil.MS(f.UpdatedBefore)))
	}
	query := `SELECT ` + storeutil.InstanceColumns + ` FROM sandbox_instances` + whereClause(where) + ` ORDER BY updated_at, key`
	if f.Limit > 0 {
		query += ` LIMIT ` + a.add(f.Limit)
	}
	rows, err := s.pool.Query(ctx, query, a...)
	if err != nil {
		return nil, s.wrap(ctx, op, "", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.Instance, error) {
		return storeutil.ScanInstance(row.Scan)
	})
	return out, s.wrap(ctx, op, "", err)
}

// --- runs --------------------------------------------------------------------

type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func getRun(ctx context.Context, q querier, id string, forUpdate bool) (store.Run, bool, error) {
	query := `SELECT ` + storeutil.RunColumns + ` FROM corral_runs WHERE id = $1`
	if forUpdate {
		query += ` FOR UPDATE`
	}
	r, err := storeutil.ScanRun(q.QueryRow(ctx, query, id).Scan)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Run{}, false, nil
	}
	if err != nil {
		return store.Run{}, false, err
	}
	return r, true, nil
}

// GetRun implements store.RunStore.
func (s *Store) GetRun(ctx context.Context, id string) (store.Run, bool, error) {
	const op = storeutil.OpGetRun
	if err := s.check(op, id); err != nil {
		return store.Run{}, false, err
	}
	r, ok, err := getRun(ctx, s.pool, id, false)
	return r, ok, s.wrap(ctx, op, id, err)
}

// inTx runs fn in a transaction and commits it when fn returns nil.
func (s *Store) inTx(ctx context.Context, op, id string, fn func(tx pgx.Tx) error) error {
	if err := s.check(op, id); err != nil {
		return err
	}
	return s.wrap(ctx, op, id, pgx.BeginFunc(ctx, s.pool, fn))
}

func (s *Store) queryRuns(ctx context.Context, op, query string, a args) ([]store.Run, error) {
	rows, err := s.pool.Query(ctx, query, a...)
	if err != nil {
		return nil, s.wrap(ctx, op, "", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.Run, error) {
		return storeutil.ScanRun(row.Scan)
	})
	return out, s.wrap(ctx, op, "", err)
}

func nonTerminal(a *args) string {
	var ss []string
	for _, st := range storeutil.NonTerminalStatuses() {
		ss = append(ss, string(st))
	}
	return "status = ANY(" + a.add(ss) + ")"
}

// ActiveRun implements store.RunStore.
func (s *Store) ActiveRun(ctx context.Context, threadID, tenant string) (store.Run, bool, error) {
	const op = storeutil.OpActiveRun
	if err := s.check(op, threadID); err != nil {
		return store.Run{}, false, err
	}
	var a args
	query := `SELECT ` + storeutil.RunColumns + ` FROM corral_runs WHERE thread_id = ` + a.add(threadID) +
		` AND tenant = ` + a.add(tenant) + ` AND ` + nonTerminal(&a) + ` ORDER BY created_at DESC, id DESC LIMIT 1`
	rs, err := s.queryRuns(ctx, op, query, a)
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
	var a args
	var where []string
	if f.ThreadID != "" {
		where = append(where, "thread_id = "+a.add(f.ThreadID))
	}
	if f.Tenant != "" {
		where = append(where, "tenant = "+a.add(f.Tenant))
	}
	if len(f.Statuses) > 0 {
		ss := make([]string, len(f.Statuses))
		for i, st := range f.Statuses {
			ss[i] = string(st)
		}
		where = append(where, "status = ANY("+a.add(ss)+")")
	}
	if !f.UpdatedBefore.IsZero() {
		where = append(where, "updated_at < "+a.add(storeutil.MS(f.UpdatedBefore)))
	}
	query := `SELECT ` + storeutil.RunColumns + ` FROM corral_runs` + whereClause(where) + ` ORDER BY created_at, id`
	if f.Limit > 0 {
		query += ` LIMIT ` + a.add(f.Limit)
	}
	return s.queryRuns(ctx, op, query, a)
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
	var a args
	query := `SELECT ` + storeutil.RunColumns + ` FROM corral_runs WHERE detached_since IS NOT NULL AND detached_since <= ` +
		a.add(storeutil.MS(detachedBefore)) + ` AND ` + nonTerminal(&a) + ` ORDER BY detached_since, id`
	if limit > 0 {
		query += ` LIMIT ` + a.add(limit)
	}
	return s.queryRuns(ctx, op, query, a)
}

// --- events ------------------------------------------------------------------

// logState reads what the fences need from the run row, locking it when
// forUpdate.
func logState(ctx context.Context, q querier, op, runID string, forUpdate bool) (epoch, lastSeq int64, closed bool, err error) {
	query := `SELECT driver_epoch, last_seq, log_closed_at FROM corral_runs WHERE id = $1`
	if forUpdate {
		query += ` FOR UPDATE`
	}
	var closedAt *int64
	err = q.QueryRow(ctx, query, runID).Scan(&epoch, &lastSeq, &closedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, 0, false, storeutil.RunNotFound(op, runID)
	}
	return epoch, lastSeq, closedAt != nil, err
}

// LastSeq implements store.EventLog.
func (s *Store) LastSeq(ctx context.Context, runID string) (int64, error) {
	const op = storeutil.OpLastSeq
	if err := s.check(op, runID); err != nil {
		return 0, err
	}
	_, last, _, err := logState(ctx, s.pool, op, runID, false)
	return last, s.wrap(ctx, op, runID, err)
}

// LogSize implements store.EventLog.
func (s *Store) LogSize(ctx context.Context, runID string) (int64, error) {
	const op = storeutil.OpLogSize
	if err := s.check(op, runID); err != nil {
		return 0, err
	}
	var n int64
	err := s.pool.QueryRow(ctx, `SELECT log_bytes FROM corral_runs WHERE id = $1`, runID).Scan(&n)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, storeutil.RunNotFound(op, runID)
	}
	return n, s.wrap(ctx, op, runID, err)
}

// LogClosed implements store.EventLog.
func (s *Store) LogClosed(ctx context.Context, runID string) (bool, error) {
	const op = storeutil.OpLogClosed
	if err := s.check(op, runID); err != nil {
		return false, err
	}
	_, _, closed, err := logState(ctx, s.pool, op, runID, false)
	return closed, s.wrap(ctx, op, runID, err)
}

// --- locks -------------------------------------------------------------------

// dbNowMS is the database's clock in epoch milliseconds: every lease expiry
// is computed and compared by it, never by a host's clock.
const dbNowMS = `floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint`

// A row's token only ever grows (the row is never deleted); expires_at is
// NULL after a release. ON CONFLICT DO UPDATE locks the row and re-checks
// the WHERE on its newest version, so two acquirers cannot both win.
const (
	acquireSQL = `INSERT INTO corral_leases AS l (name, token, expires_at) VALUES ($1, 1, ` + dbNowMS + ` + $2)
ON CONFLICT (name) DO UPDATE SET token = l.token + 1, expires_at = EXCLUDED.expires_at
WHERE l.expires_at IS NULL OR l.expires_at <= ` + dbNowMS + `
RETURNING token`
	renewSQL   = `UPDATE corral_leases SET expires_at = ` + dbNowMS + ` + $3 WHERE name = $1 AND token = $2 AND expires_at IS NOT NULL`
	releaseSQL = `UPDATE corral_leases SET expires_at = NULL WHERE name = $1 AND token = $2`
)

// TryLock implements store.Locker.
func (s *Store) TryLock(ctx context.Context, name string, ttl time.Duration) (store.Lease, bool, error) {
	const op = storeutil.OpLock
	if err := storeutil.ValidateLockArgs(name, ttl); err != nil {
		return nil, false, err
	}
	if err := s.check(op, name); err != nil {
		return nil, false, err
	}
	start := time.Now()
	var token int64
	found, err := s.queryRowWrite(ctx, acquireSQL, []any{name, storeutil.TTLMillis(ttl)}, func(row pgx.Row) error { return row.Scan(&token) })
	if err != nil {
		return nil, false, s.wrap(ctx, op, name, err)
	}
	if !found {
		return nil, false, nil
	}
	l := lease.Start(lease.Config{
		Name: name, Token: token, TTL: ttl, Start: start, Logger: s.log, OnEnd: s.leases.Remove,
		Backend: &pgLease{s: s, name: name, token: token, ttl: ttl},
	})
	s.leases.Add(l)
	return l, true, nil
}

// Lock implements store.Locker. Waiters poll (2ms growing to 200ms); a
// release by this process wakes its own waiters at once.
func (s *Store) Lock(ctx context.Context, name string, ttl time.Duration) (store.Lease, error) {
	return lease.Wait(ctx, name, &s.leases.Waker, func(ctx context.Context) (store.Lease, bool, error) {
		return s.TryLock(ctx, name, ttl)
	})
}

type pgLease struct {
	s     *Store
	name  string
	token int64
	ttl   time.Duration
}

func (l *pgLease) Renew(ctx context.Context) (bool, error) {
	tag, err := l.s.execWrite(ctx, renewSQL, l.name, l.token, storeutil.TTLMillis(l.ttl))
	if err != nil {
		return false, l.s.wrap(ctx, storeutil.OpRenew, l.name, err)
	}
	return tag.RowsAffected() == 1, nil
}

func (l *pgLease) Release(ctx context.Context) error {
	_, err := l.s.execWrite(ctx, releaseSQL, l.name, l.token)
	return l.s.wrap(ctx, storeutil.OpRelease, l.name, err)
}
