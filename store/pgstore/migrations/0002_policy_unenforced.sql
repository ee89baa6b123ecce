-- The rules of a run's policy its harness cannot enforce (JSON), set at
-- create.
ALTER TABLE corral_runs ADD COLUMN policy_unenforced TEXT;
