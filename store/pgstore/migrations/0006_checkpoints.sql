-- Checkpoints (issue 17): portable snapshots of threads, their heads and
-- writer leases, the reference counts of the blobs they name, and the blobs
-- themselves (in a table of this database unless the caller uses a BlobStore of its own).

-- One row per thread that has had a writer or a checkpoint. head is the
-- head checkpoint's id or NULL; writer_fence only grows (the row is never
-- deleted); writer_expires is NULL once the writer released.
CREATE TABLE corral_checkpoint_threads (
  tenant         TEXT NOT NULL,
  thread_id      TEXT NOT NULL,
  head           TEXT,
  writer_token   TEXT,
  writer_fence   BIGINT NOT NULL DEFAULT 0,
  writer_expires BIGINT,
  PRIMARY KEY (tenant, thread_id)
);

-- The published checkpoints (ids and digests compare as bytes: COLLATE
-- "C"); entries is a JSON array of the workspace's entries, so that a
-- listing reads one row per checkpoint.
CREATE TABLE corral_checkpoints (
  tenant               TEXT NOT NULL,
  thread_id            TEXT NOT NULL,
  id                   TEXT COLLATE "C" NOT NULL,
  parent               TEXT,
  created_at           BIGINT NOT NULL,
  reason               TEXT NOT NULL CHECK (reason IN ('automatic', 'named', 'fork-root', 'before-destroy')),
  label                TEXT,
  source_run_id        TEXT,
  source_thread_id     TEXT,
  source_checkpoint_id TEXT,
  conversation         TEXT,
  bytes                BIGINT NOT NULL CHECK (bytes >= 0),
  entries              TEXT NOT NULL,
  PRIMARY KEY (tenant, thread_id, id)
);
CREATE INDEX corral_checkpoints_order ON corral_checkpoints (tenant, thread_id, created_at, id);

-- How many published checkpoints reference each blob; a row goes at 0.
CREATE TABLE corral_blob_refs (
  digest TEXT COLLATE "C" PRIMARY KEY,
  refs   BIGINT NOT NULL CHECK (refs >= 0)
);

-- The content-addressed blobs, keyed by the hex SHA-256 of data.
CREATE TABLE corral_blobs (
  digest TEXT COLLATE "C" PRIMARY KEY,
  size   BIGINT NOT NULL,
  data   BYTEA NOT NULL
);
