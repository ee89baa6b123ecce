package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/d10ffeed/corral/store"
	"github.com/d10ffeed/corral/store/internal/lease"
	"github.com/d10ffeed/corral/store/internal/storeutil"
)

// The lease table's clock is this machine's wall clock (every process that
// shares the file runs on it). A row's token only ever grows; expires_at is
// NULL after a release.
const (
	acquireSQL = `INSERT INTO corral_leases (name, token, expires_at) VALUES (?1, 1, ?2 + ?3)
ON CONFLICT (name) DO UPDATE SET token = token + 1, expires_at = excluded.expires_at
WHERE expires_at IS NULL OR expires_at <= ?2
RETURNING token`
	renewSQL   = `UPDATE corral_leases SET expires_at = ? WHERE name = ? AND token = ? AND expires_at IS NOT NULL`
	releaseSQL = `UPDATE corral_leases SET expires_at = NULL WHERE name = ? AND token = ?`
)

// TryLock implements store.Locker.
func (s *Store) TryLock(ctx context.Context, name string, ttl time.Duration) (store.Lease, bool, error) {
	const op = storeutil.OpLock
	if err := storeutil.ValidateLockArgs(name, ttl); err != nil {
		return nil, false, err
	}
	start := time.Now()
	var token int64
	var got bool
	err := s.write(ctx, op, name, func(ctx context.Context, c conn) error {
		// The expiry counts from when the caller asked, not from when its
		// batch ran: the lease may only be shorter than the holder thinks.
		err := c.QueryRowContext(ctx, acquireSQL, name, start.UnixMilli(), storeutil.TTLMillis(ttl)).Scan(&token)
		if errors.Is(err, sql.ErrNoRows) {
			return nil // held by another: nothing written
		}
		got = err == nil
		return err
	})
	if err != nil || !got {
		return nil, false, err
	}
	l := lease.Start(lease.Config{
		Name: name, Token: token, TTL: ttl, Start: start, Logger: s.log, OnEnd: s.leases.Remove,
		Backend: &sqlLease{s: s, name: name, token: token, ttl: ttl},
	})
	s.leases.Add(l)
	return l, true, nil
}

// Lock implements store.Locker.
func (s *Store) Lock(ctx context.Context, name string, ttl time.Duration) (store.Lease, error) {
	return lease.Wait(ctx, name, &s.leases.Waker, func(ctx context.Context) (store.Lease, bool, error) {
		return s.TryLock(ctx, name, ttl)
	})
}

// sqlLease is a lease's storage side; its writes go through the writer
// without the closed check, so Close can release what the store holds.
type sqlLease struct {
	s     *Store
	name  string
	token int64
	ttl   time.Duration
}

func (l *sqlLease) Renew(ctx context.Context) (bool, error) {
	asked := time.Now()
	var n int64
	err := l.s.submit(ctx, func(ctx context.Context, c conn) error {
		res, err := c.ExecContext(ctx, renewSQL, asked.UnixMilli()+storeutil.TTLMillis(l.ttl), l.name, l.token)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return n == 1, wrapErr(ctx, storeutil.OpRenew, l.name, err)
}

func (l *sqlLease) Release(ctx context.Context) error {
	err := l.s.submit(ctx, func(ctx context.Context, c conn) error {
		_, err := c.ExecContext(ctx, releaseSQL, l.name, l.token)
		return err
	})
	return wrapErr(ctx, storeutil.OpRelease, l.name, err)
}
