-- The first token of a record's life (dedupe.Record.FirstToken), added
-- after 001. Apply it before deploying a version of pkg/pgstore that
-- reads it: the store's statements name both columns.
--
-- Backward compatible: both columns are nullable and have no default, so
-- adding them rewrites nothing, rows written before read as having no
-- first token (Record.Life falls back to the owner), and a writer of an
-- earlier version keeps working.
--
-- first_token is meaningful only while first_token_owner = owner: a claim
-- by an earlier version changes owner but not these columns, so its rows
-- read as having no first token instead of another life's. Every
-- statement is idempotent.

ALTER TABLE dedupe_records ADD COLUMN IF NOT EXISTS first_token text;        -- token of the claim that started the record's life
ALTER TABLE dedupe_records ADD COLUMN IF NOT EXISTS first_token_owner text;  -- owner when first_token was written
