-- The prompt a run was started with, set at create.
ALTER TABLE corral_runs ADD COLUMN prompt TEXT;
