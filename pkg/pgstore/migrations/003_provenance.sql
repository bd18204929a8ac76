-- The request ID and trace context of the execution a row belongs to (the
-- owner's while in flight, the completing one's once COMPLETED), and the
-- index an operator finds a row by from a log line's key:<12 hex>
-- (dedupe show key:...). Added after 002. Apply it before deploying a
-- version of pkg/pgstore that reads them: the store's statements name
-- both columns.
--
-- Backward compatible: both columns are nullable, rows written before
-- read as empty, and the index is an expression over the key (its KeyRef),
-- so there is no column to write and nothing to keep in step. Every
-- statement is idempotent.

ALTER TABLE dedupe_records ADD COLUMN IF NOT EXISTS request_id text;
ALTER TABLE dedupe_records ADD COLUMN IF NOT EXISTS trace text;

CREATE INDEX IF NOT EXISTS dedupe_records_ref_idx
    ON dedupe_records (('key:' || left(encode(sha256(key), 'hex'), 12)));
