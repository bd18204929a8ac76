-- The index an operator lists retired rows by (dedupe stranded), added
-- after 005. Reap retires a stranded row (IN_PROGRESS, its lease run out
-- more than the grace ago) by setting inflight to false: it leaves the
-- partial in-flight index, so Reap never counts it again, and enters
-- this one, so Store.InFlight still lists what the reaper counted. A
-- takeover claim sets inflight to true again; a completion or a release
-- sets it to NULL.
--
-- Backward compatible: it only creates an index. Without it, InFlight
-- reads the retired rows with a sequential scan. Rows retired by an
-- earlier version (inflight NULL) are not in it; they are not listed,
-- and expire as before. The statement is idempotent.

CREATE INDEX IF NOT EXISTS dedupe_records_retired_idx
    ON dedupe_records (lease_expires_at) WHERE inflight IS FALSE;
