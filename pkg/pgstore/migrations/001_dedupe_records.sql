-- The idempotency records of pkg/pgstore, one row per key.
--
-- Apply it with your migration tool, or call pgstore.CreateSchema, which
-- runs this file (with the table name of Options.Table in place of
-- dedupe_records). Every statement is idempotent.
--
-- Times are integers, as the store compares them: epoch seconds for the
-- record's expiry, epoch milliseconds for everything else. They come from
-- the writers' requests, never from the server's clock.

CREATE TABLE IF NOT EXISTS dedupe_records (
    key              bytea   PRIMARY KEY,  -- the full, scoped key (UTF-8, 1 to 2048 bytes)
    status           text    NOT NULL CHECK (status IN ('IN_PROGRESS', 'COMPLETED')),
    fingerprint      text    NOT NULL,     -- request fingerprint
    owner            text    NOT NULL,     -- owner token of the current claim (fencing)
    lease_expires_at bigint  NOT NULL,     -- lease end, epoch ms
    expires_at       bigint  NOT NULL,     -- record expiry, epoch s; expired rows count as absent
    created_at       bigint  NOT NULL,     -- claim time, epoch ms
    updated_at       bigint  NOT NULL,     -- last write, epoch ms
    res_status       integer,              -- result status code (COMPLETED)
    res_headers      bytea,                -- result headers, length-prefixed (byte-exact), NULL when none
    res_body         bytea,                -- result body, NULL when empty
    res_omitted      boolean NOT NULL DEFAULT false,  -- COMPLETED without its result
    inflight         boolean               -- true while IN_PROGRESS and not retired by Reap, else NULL
);

-- Reap deletes expired rows in expiry order, a bounded range of this index
-- per batch.
CREATE INDEX IF NOT EXISTS dedupe_records_expires_at_idx
    ON dedupe_records (expires_at);

-- Partial: only rows in flight, so Reap finds stranded ones without
-- reading completed ones. Complete and Reap's retirement clear inflight.
CREATE INDEX IF NOT EXISTS dedupe_records_inflight_idx
    ON dedupe_records (lease_expires_at) WHERE inflight;
