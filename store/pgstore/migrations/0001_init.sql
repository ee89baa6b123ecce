-- corral's store schema, version 1. Times are epoch milliseconds.

-- The sandbox key -> provider sandbox map. One row per key; a put replaces
-- the whole row.
CREATE TABLE sandbox_instances (
  key                 TEXT PRIMARY KEY,
  provider            TEXT NOT NULL,
  provider_sandbox_id TEXT NOT NULL,
  latest_snapshot_id  TEXT,
  thread_id           TEXT NOT NULL,
  latest_run_id       TEXT,
  definition_id       TEXT,
  tenant              TEXT,
  created_at          BIGINT NOT NULL,
  updated_at          BIGINT NOT NULL
);
CREATE INDEX sandbox_instances_updated ON sandbox_instances (updated_at, key);
CREATE INDEX sandbox_instances_thread ON sandbox_instances (thread_id, updated_at, key);

-- Run records. last_seq and log_closed_at describe the run's event log and
-- live on the run row so that an append checks the epoch, the closed marker
-- and the next seq under one row lock.
CREATE TABLE corral_runs (
  id               TEXT PRIMARY KEY,
  thread_id        TEXT NOT NULL,
  tenant           TEXT NOT NULL DEFAULT '',
  definition_id    TEXT,
  harness          TEXT,
  status           TEXT NOT NULL CHECK (status IN ('running', 'completed', 'failed', 'cancelled', 'aborted')),
  created_at       BIGINT NOT NULL,
  updated_at       BIGINT NOT NULL,
  finished_at      BIGINT,
  error            TEXT,
  exit_code        INTEGER,
  journal_nonce    TEXT,
  sandbox_key      TEXT,
  detached_since   BIGINT,
  cancel_requested BIGINT,
  driver_epoch     BIGINT NOT NULL DEFAULT 0 CHECK (driver_epoch >= 0),
  last_seq         BIGINT NOT NULL DEFAULT 0,
  log_closed_at    BIGINT
);
CREATE INDEX corral_runs_thread ON corral_runs (thread_id, tenant, created_at, id);
CREATE INDEX corral_runs_created ON corral_runs (created_at, id);
CREATE INDEX corral_runs_detached ON corral_runs (detached_since, id) WHERE detached_since IS NOT NULL;

-- The events of each run, seq dense from 1.
CREATE TABLE corral_run_events (
  run_id TEXT NOT NULL REFERENCES corral_runs (id) ON DELETE CASCADE,
  seq    BIGINT NOT NULL CHECK (seq >= 1),
  type   TEXT NOT NULL,
  data   BYTEA,
  time   BIGINT NOT NULL,
  PRIMARY KEY (run_id, seq)
);

-- Lock leases. token is the last fencing token issued for the name (the row
-- is never deleted, so tokens are never reused); expires_at is NULL once
-- the holder released.
CREATE TABLE corral_leases (
  name       TEXT PRIMARY KEY,
  token      BIGINT NOT NULL,
  expires_at BIGINT
);
