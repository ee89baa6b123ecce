-- What the stores keep of a run once it has ended (all when NULL), set at
-- create, and when ForgetRun erased the rest.
ALTER TABLE corral_runs ADD COLUMN retention TEXT;
ALTER TABLE corral_runs ADD COLUMN forgotten_at BIGINT;
CREATE INDEX corral_runs_forgettable ON corral_runs (finished_at, id) WHERE retention IS NOT NULL AND forgotten_at IS NULL;
CREATE INDEX corral_runs_finished ON corral_runs (finished_at, id) WHERE finished_at IS NOT NULL;
