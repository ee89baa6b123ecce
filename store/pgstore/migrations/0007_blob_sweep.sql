-- The blob sweep generation (issue 17): one row, even while no sweep runs
-- and odd while one does (expires is then when it ends by itself). A writer
-- lease remembers the generation it was taken under, and a checkpoint is
-- published only under the same one (store.BlobSweep).
CREATE TABLE corral_blob_sweep (
  id      INTEGER PRIMARY KEY CHECK (id = 1),
  gen     BIGINT NOT NULL CHECK (gen >= 0),
  expires BIGINT
);
INSERT INTO corral_blob_sweep (id, gen) VALUES (1, 0);
