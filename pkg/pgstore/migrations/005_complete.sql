-- The store's completion as a server-side function, added after 004.
-- Apply it before deploying a version of pkg/pgstore that calls it: its
-- completion is one `SELECT dedupe_records_complete(...)`, and its claim
-- names the function too (see below), so that a table without it fails
-- the first claim, before any work runs, and not the first completion.
--
-- Why: as for the claim (004_functions.sql), PostgreSQL caches the plan
-- of a PL/pgSQL function's statement per session, so a completion is
-- planned once per server connection even when the client cannot keep
-- prepared statements (PgBouncer in transaction mode, RDS Proxy, pgx's
-- exec and simple-protocol modes), where the UPDATE below would
-- otherwise be parsed and planned again on every call.
--
-- The function is named after the table (pgstore.CreateSchema puts the
-- table of Options.Table in place of dedupe_records everywhere, the
-- function's name included), runs with the caller's rights (SECURITY
-- INVOKER, the default) and resolves the table through the caller's
-- search_path, as the store's other statements do.
--
-- Backward compatible: it adds a function and changes no table, so
-- writers of earlier versions, which send the UPDATE themselves, keep
-- working beside it. CREATE OR REPLACE makes it idempotent; run it from
-- one session at a time (PostgreSQL refuses to replace one function
-- from two sessions at once).
--
-- What it does, with the arguments
--
--   p_key  p_token  p_now_s  p_expires_s  p_now_ms  p_status  p_headers  p_body  p_omitted  p_request_id  p_trace
--
-- It runs the store's completion, one UPDATE of the row by key fenced by
-- the owner token and the record's expiry (an expired row is absent: a
-- token that held it cannot complete it), exactly as the statement of
-- earlier versions did: the row becomes COMPLETED with the result, its
-- new expiry and provenance (request_id, trace; empty means NULL), and
-- leaves the in-flight index. first_token and first_token_owner are not
-- touched, so the completed record keeps its life. It returns whether the
-- row was updated: false means the caller no longer holds the key.

CREATE OR REPLACE FUNCTION dedupe_records_complete(
    p_key bytea, p_token text, p_now_s bigint, p_expires_s bigint, p_now_ms bigint,
    p_status integer, p_headers bytea, p_body bytea, p_omitted boolean, p_request_id text, p_trace text)
RETURNS boolean
LANGUAGE plpgsql VOLATILE
AS $fn$
BEGIN
    UPDATE dedupe_records r SET
        status = 'COMPLETED', expires_at = p_expires_s, updated_at = p_now_ms,
        res_status = p_status, res_headers = p_headers, res_body = p_body, res_omitted = p_omitted,
        inflight = NULL, request_id = NULLIF(p_request_id, ''), trace = NULLIF(p_trace, '')
    WHERE r.key = p_key AND r.owner = p_token AND r.expires_at >= p_now_s;
    RETURN FOUND;
END
$fn$;
