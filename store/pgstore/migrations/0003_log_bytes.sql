-- corral's store schema, version 2: the size of each run's event log
-- (the sum of its events' data lengths), kept on the run row beside
-- last_seq and moved by every append, so that it costs one read.
ALTER TABLE corral_runs ADD COLUMN log_bytes BIGINT NOT NULL DEFAULT 0;
UPDATE corral_runs SET log_bytes = (
  SELECT COALESCE(SUM(octet_length(e.data)), 0) FROM corral_run_events e WHERE e.run_id = corral_runs.id
);
