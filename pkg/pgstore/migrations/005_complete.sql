-- The store's completion as a server-side function, and a cheaper claim
-- of an absent key, added after 004. Apply it before deploying a version
-- of pkg/pgstore that calls it: its completion is one
-- `SELECT dedupe_records_complete(...)`, and its claim names that function
-- too, so that a table without it fails the first claim, before any work
-- runs, and not the first completion.
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
-- Backward compatible: it adds a function, replaces the claim function
-- by one with the same arguments, results and decisions (below), and
-- changes no table, so writers of earlier versions (which send the
-- UPDATE themselves, and call the claim function or send its statement)
-- keep working beside it. CREATE OR REPLACE makes it idempotent; run it
-- from one session at a time (PostgreSQL refuses to replace one function
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

-- The claim function of 004_functions.sql, replaced (same arguments, same
-- result columns) by one whose claim of an absent key is a plain INSERT:
--
-- 1. The read by key, as in 004: a row that is not free for the request
--    is the answer (acquired = false), read-only.
-- 2. New: INSERT ... ON CONFLICT (key) DO NOTHING RETURNING the new row
--    (acquired = true). When no row holds the key, this is the row the
--    upsert of step 3 would insert, with the same values; it spares an
--    absent key (every fresh request) the upsert's conflict update and
--    its second CTE. When a row holds the key (one free for the request:
--    expired, or in flight with the caller's token, or with its lease
--    run out and the caller's fingerprint; or one that committed after
--    step 1's snapshot), it inserts, locks and returns nothing, and
--    step 3 decides, with a snapshot of its own, exactly as in 004.
-- 3. The upsert of 004, unchanged.
--
-- Each step is one statement that decides from one state of the row, so
-- the claim is still one atomic decision; the store's randomized test
-- compares it with the statement of the versions before 004 on every
-- boundary, and its linearizability check runs it concurrently.

CREATE OR REPLACE FUNCTION dedupe_records_claim(
    p_key bytea, p_fingerprint text, p_token text, p_lease_ms bigint, p_expires_s bigint,
    p_now_ms bigint, p_now_s bigint, p_request_id text, p_trace text)
RETURNS TABLE (
    acquired boolean, status text, fingerprint text, owner text, lease_expires_at bigint,
    expires_at bigint, created_at bigint, updated_at bigint, res_status integer,
    res_headers bytea, res_body bytea, res_omitted boolean, request_id text, trace text,
    first_token text)
LANGUAGE plpgsql VOLATILE
AS $fn$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    SELECT false, r.status, r.fingerprint, r.owner, r.lease_expires_at, r.expires_at, r.created_at,
           r.updated_at, r.res_status, r.res_headers, r.res_body, r.res_omitted, r.request_id, r.trace,
           CASE WHEN r.first_token_owner = r.owner THEN r.first_token END
    FROM dedupe_records r
    WHERE r.key = p_key
      AND NOT (r.expires_at < p_now_s
           OR (r.status = 'IN_PROGRESS' AND (r.owner = p_token
               OR (r.lease_expires_at < p_now_ms AND r.fingerprint = p_fingerprint))));
    IF FOUND THEN
        RETURN;
    END IF;

    RETURN QUERY
    INSERT INTO dedupe_records AS r
        (key, status, fingerprint, owner, lease_expires_at, expires_at, created_at, updated_at, inflight,
         request_id, trace, first_token, first_token_owner)
    VALUES (p_key, 'IN_PROGRESS', p_fingerprint, p_token, p_lease_ms, p_expires_s, p_now_ms, p_now_ms, true,
            NULLIF(p_request_id, ''), NULLIF(p_trace, ''), p_token, p_token)
    ON CONFLICT (key) DO NOTHING
    RETURNING true, r.status, r.fingerprint, r.owner, r.lease_expires_at, r.expires_at,
              r.created_at, r.updated_at, r.res_status, r.res_headers, r.res_body, r.res_omitted,
              r.request_id, r.trace, CASE WHEN r.first_token_owner = r.owner THEN r.first_token END;
    IF FOUND THEN
        RETURN;
    END IF;

    RETURN QUERY
    WITH claimed AS (
        INSERT INTO dedupe_records AS r
            (key, status, fingerprint, owner, lease_expires_at, expires_at, created_at, updated_at, inflight,
             request_id, trace, first_token, first_token_owner)
        VALUES (p_key, 'IN_PROGRESS', p_fingerprint, p_token, p_lease_ms, p_expires_s, p_now_ms, p_now_ms, true,
                NULLIF(p_request_id, ''), NULLIF(p_trace, ''), p_token, p_token)
        ON CONFLICT (key) DO UPDATE SET
            first_token = CASE WHEN r.expires_at < p_now_s THEN excluded.owner
                ELSE COALESCE(CASE WHEN r.first_token_owner = r.owner THEN r.first_token END, r.owner) END,
            first_token_owner = excluded.owner,
            status = 'IN_PROGRESS', fingerprint = excluded.fingerprint, owner = excluded.owner,
            lease_expires_at = excluded.lease_expires_at, expires_at = excluded.expires_at,
            created_at = excluded.created_at, updated_at = excluded.updated_at,
            res_status = NULL, res_headers = NULL, res_body = NULL, res_omitted = false, inflight = true,
            request_id = excluded.request_id, trace = excluded.trace
        WHERE r.expires_at < p_now_s
           OR (r.status = 'IN_PROGRESS' AND (r.owner = excluded.owner
               OR (r.lease_expires_at < p_now_ms AND r.fingerprint = excluded.fingerprint)))
        RETURNING true AS acquired, r.status, r.fingerprint, r.owner, r.lease_expires_at, r.expires_at,
                  r.created_at, r.updated_at, r.res_status, r.res_headers, r.res_body, r.res_omitted,
                  r.request_id, r.trace, CASE WHEN r.first_token_owner = r.owner THEN r.first_token END
    ), existing AS (
        SELECT false AS acquired, e.status, e.fingerprint, e.owner, e.lease_expires_at, e.expires_at,
               e.created_at, e.updated_at, e.res_status, e.res_headers, e.res_body, e.res_omitted,
               e.request_id, e.trace, CASE WHEN e.first_token_owner = e.owner THEN e.first_token END
        FROM dedupe_records e
        WHERE e.key = p_key AND NOT EXISTS (SELECT 1 FROM claimed)
        FOR SHARE
    )
    SELECT * FROM claimed
    UNION ALL
    SELECT * FROM existing;
END
$fn$;
