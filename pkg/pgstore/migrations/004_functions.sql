-- The store's claim as a server-side function, added after 003. Apply it
-- before deploying a version of pkg/pgstore that calls it: its claim is
-- one `SELECT * FROM dedupe_records_claim(...)`.
--
-- Why: PostgreSQL caches the plans of a PL/pgSQL function's statements
-- per session, so a claim is planned once per server connection even
-- when the client cannot keep prepared statements (PgBouncer in
-- transaction mode, RDS Proxy, pgx's exec and simple-protocol modes),
-- where the statement below would otherwise be parsed and planned again
-- on every call.
--
-- The function is named after the table (pgstore.CreateSchema puts the
-- table of Options.Table in place of dedupe_records everywhere, the
-- function's name included), runs with the caller's rights (SECURITY
-- INVOKER, the default: the role needs EXECUTE, which PUBLIC has unless
-- default privileges revoke it, and the table rights it has today) and
-- resolves the table through the caller's search_path, as the store's
-- other statements do.
--
-- Backward compatible: it adds a function and changes no table, so
-- writers of earlier versions, which send the statement themselves, keep
-- working beside it. CREATE OR REPLACE makes it idempotent; run it from
-- one session at a time (PostgreSQL refuses to replace one function
-- from two sessions at once).
--
-- What it does, with the arguments
--
--   p_key  p_fingerprint  p_token  p_lease_ms  p_expires_s  p_now_ms  p_now_s  p_request_id  p_trace
--
-- 1. It reads the row by key, without locking it. When the row is there
--    and is not free for the request (the negation of the conflict
--    update's WHERE below: not expired, and not IN_PROGRESS with the
--    caller's token or with its lease run out and the caller's
--    fingerprint), that row is the answer: acquired = false. This is the
--    common duplicate, answered read-only, as a plain SELECT by key.
-- 2. Otherwise it runs the claim: an INSERT ... ON CONFLICT DO UPDATE
--    whose update applies only when the key is free for the request,
--    with a second CTE that returns the conflicting row, FOR SHARE, when
--    it does not. One statement, one atomic decision.
--
-- Each step is one statement with a snapshot of its own (the function is
-- VOLATILE, the default), and each answer is decided from one state of
-- the row: step 1's from the version its snapshot sees (committed before
-- the read), step 2's as before. When step 2 conflicts with a row that
-- committed after its snapshot it returns no row, and the store calls
-- the function again, whose step 1 then sees that row.
--
-- The result columns are the store's record columns, preceded by
-- acquired; first_token is read only while first_token_owner = owner
-- (002_first_token.sql).

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
