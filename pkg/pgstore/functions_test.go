package pgstore_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/pgstore"
)

// previousClaimSQL is the claim statement of the version before
// 004_functions.sql, which sent it inline; TestClaimFunctionEquivalent
// checks that the function decides exactly as it did.
const previousClaimSQL = `
WITH claimed AS (
    INSERT INTO dedupe_records AS r
        (key, status, fingerprint, owner, lease_expires_at, expires_at, created_at, updated_at, inflight,
         request_id, trace, first_token, first_token_owner)
    VALUES ($1::bytea, 'IN_PROGRESS', $2::text, $3::text, $4::bigint, $5::bigint, $6::bigint, $6::bigint, true,
            NULLIF($8::text, ''), NULLIF($9::text, ''), $3::text, $3::text)
    ON CONFLICT (key) DO UPDATE SET
        first_token = CASE WHEN r.expires_at < $7::bigint THEN excluded.owner
            ELSE COALESCE(CASE WHEN r.first_token_owner = r.owner THEN r.first_token END, r.owner) END,
        first_token_owner = excluded.owner,
        status = 'IN_PROGRESS', fingerprint = excluded.fingerprint, owner = excluded.owner,
        lease_expires_at = excluded.lease_expires_at, expires_at = excluded.expires_at,
        created_at = excluded.created_at, updated_at = excluded.updated_at,
        res_status = NULL, res_headers = NULL, res_body = NULL, res_omitted = false, inflight = true,
        request_id = excluded.request_id, trace = excluded.trace
    WHERE r.expires_at < $7::bigint
       OR (r.status = 'IN_PROGRESS' AND (r.owner = excluded.owner
           OR (r.lease_expires_at < $6::bigint AND r.fingerprint = excluded.fingerprint)))
    RETURNING true AS acquired, status, fingerprint, owner, lease_expires_at, expires_at, created_at, updated_at,
       res_status, res_headers, res_body, res_omitted, request_id, trace,
       CASE WHEN first_token_owner = owner THEN first_token END
), existing AS (
    SELECT false AS acquired, status, fingerprint, owner, lease_expires_at, expires_at, created_at, updated_at,
       res_status, res_headers, res_body, res_omitted, request_id, trace,
       CASE WHEN first_token_owner = owner THEN first_token END
    FROM dedupe_records
    WHERE key = $1::bytea AND NOT EXISTS (SELECT 1 FROM claimed)
    FOR SHARE
)
SELECT * FROM claimed
UNION ALL
SELECT * FROM existing`

// TestClaimFunctionEquivalent checks, on random rows and requests around
// every boundary (expiry and lease equal to now, one before, one after;
// own and other tokens and fingerprints; absent rows; rows of an earlier
// version without a first token), that a claim through the function of
// 004_functions.sql returns what the previous inline statement returned
// and leaves the same row. The function answers some duplicates from a
// read, so this is what shows that its read decides as the update's
// WHERE does.
func TestClaimFunctionEquivalent(t *testing.T) {
	p := newPool(t)
	ctx := context.Background()
	fnTable, stmtTable := newTable(t, p), newTable(t, p)
	seed := mrand.Uint64()
	t.Logf("seed %d", seed)
	rng := mrand.New(mrand.NewPCG(seed, seed))
	pick := func(xs ...string) string { return xs[rng.IntN(len(xs))] }
	const nowS = int64(2_000_000_000)
	nowMs := nowS * 1000
	read := func(table, key string) []any { return readRow(ctx, p, table, key) }
	for i := range 400 {
		key := fmt.Sprintf("k%d", i)
		if rng.IntN(6) > 0 { // else absent
			status := pick("IN_PROGRESS", "COMPLETED")
			owner := pick("tok-a", "tok-b")
			firstToken, firstOwner := any(nil), any(nil)
			switch rng.IntN(3) {
			case 0: // this life
				firstToken, firstOwner = pick("tok-a", "tok-b", "tok-z"), owner
			case 1: // claimed by an earlier version since
				firstToken, firstOwner = "tok-z", "tok-y"
			}
			fp := pick("fp-x", "fp-y")
			lease := nowMs + int64(rng.IntN(3)-1)
			expires := nowS + int64(rng.IntN(3)-1)
			for _, table := range []string{fnTable, stmtTable} {
				_, err := p.Exec(ctx, `INSERT INTO `+table+` (key, status, fingerprint, owner, lease_expires_at, expires_at,
					created_at, updated_at, res_status, res_body, inflight, first_token, first_token_owner, request_id)
					VALUES ($1, $2, $3, $4, $5, $6, 1, 2, CASE WHEN $2 = 'COMPLETED' THEN 201 END,
					CASE WHEN $2 = 'COMPLETED' THEN 'body'::bytea END, CASE WHEN $2 = 'IN_PROGRESS' THEN true END, $7, $8, 'req-old')`,
					[]byte(key), status, fp, owner, lease, expires, firstToken, firstOwner)
				if err != nil {
					t.Fatal(err)
				}
			}
		}
		args := []any{[]byte(key), pick("fp-x", "fp-y"), pick("tok-a", "tok-b", "tok-c"),
			nowMs + 60_000, nowS + 3600, nowMs, nowS, pick("", "req-new"), ""}
		fnRes := read1(t, p, strings.ReplaceAll("SELECT * FROM dedupe_records_claim($1::bytea, $2::text, $3::text, $4::bigint, $5::bigint, $6::bigint, $7::bigint, $8::text, $9::text)", "dedupe_records", fnTable), args)
		stmtRes := read1(t, p, strings.ReplaceAll(previousClaimSQL, "dedupe_records", stmtTable), args)
		if !reflect.DeepEqual(fnRes, stmtRes) {
			t.Errorf("seed %d, key %s, request %v: function returned %v, previous statement %v", seed, key, args[1:], fnRes, stmtRes)
		}
		if got, want := read(fnTable, key), read(stmtTable, key); !reflect.DeepEqual(got, want) {
			t.Errorf("seed %d, key %s, request %v: function left %v, previous statement %v", seed, key, args[1:], got, want)
		}
	}
}

// read1 runs a claim statement and returns its one row's values.
func read1(t *testing.T, p pgstore.Client, sql string, args []any) []any {
	t.Helper()
	rows, err := p.Query(context.Background(), sql, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []any
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, vals)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestDuplicateReadsWithoutLocking checks that a duplicate of a
// completed record is answered while another transaction holds the row
// locked: the function's read path takes no lock (the previous statement
// waited for it).
func TestDuplicateReadsWithoutLocking(t *testing.T) {
	p := newPool(t)
	ctx := context.Background()
	table := newTable(t, p)
	s := newStore(t, p, pgstore.Options{Table: table})
	if _, err := s.Claim(ctx, claim("k", "fp", "tok-a", base)); err != nil {
		t.Fatal(err)
	}
	if err := s.Complete(ctx, dedupe.CompleteRequest{Key: "k", Token: "tok-a", Now: base, ExpiresAt: base.Add(time.Hour), Result: dedupe.Result{StatusCode: 201}}); err != nil {
		t.Fatal(err)
	}
	tx, err := p.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT 1 FROM `+table+` WHERE key = $1 FOR UPDATE`, []byte("k")); err != nil {
		t.Fatal(err)
	}
	// The deadline only bounds a failure: a claim that waits for the
	// lock never returns before the transaction ends.
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	res, err := s.Claim(cctx, claim("k", "fp", "tok-b", base))
	if err != nil || res.Acquired || res.Record.Status != dedupe.StatusCompleted || res.Record.Token != "tok-a" {
		t.Errorf("duplicate while the row is locked: %+v, %v; want the completed record of tok-a", res, err)
	}
}

// TestClaimFunctionMissing checks that a store deployed on a table
// without 004_functions.sql fails loudly, naming the migration, and not
// as a transient failure to retry.
func TestClaimFunctionMissing(t *testing.T) {
	p := newPool(t)
	ctx := context.Background()
	table := "dedupetest_" + strings.ToLower(rand.Text()[:12])
	t.Cleanup(func() { p.Exec(context.Background(), "DROP TABLE IF EXISTS "+table) })
	for _, m := range []string{pgstore.Migration, pgstore.MigrationFirstToken, pgstore.MigrationProvenance} {
		if _, err := p.Exec(ctx, strings.ReplaceAll(m, "dedupe_records", table)); err != nil {
			t.Fatal(err)
		}
	}
	s := newStore(t, p, pgstore.Options{Table: table})
	_, err := s.Claim(ctx, claim("k", "fp", "tok", base))
	if err == nil || !strings.Contains(err.Error(), "004_functions.sql") || !strings.Contains(err.Error(), table+"_claim") || errors.Is(err, dedupe.ErrStoreUnavailable) {
		t.Errorf("Claim without 004: got %v; want a permanent error naming %s_claim and 004_functions.sql", err, table)
	}
	if err := pgstore.CreateSchema(ctx, p, table); err != nil {
		t.Fatal(err)
	}
	if res, err := s.Claim(ctx, claim("k", "fp", "tok", base)); err != nil || !res.Acquired {
		t.Errorf("Claim after CreateSchema: %+v, %v", res, err)
	}
}

// TestCreateSchemaConcurrent runs CreateSchema from several sessions at
// once on an existing table, as cold starts do: they take turns, and
// none fails (without CreateSchema's advisory lock they deadlock, and two
// concurrent CREATE OR REPLACE FUNCTION of one function fail with "tuple
// concurrently updated").
func TestCreateSchemaConcurrent(t *testing.T) {
	p := newPool(t)
	table := newTable(t, p)
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() { errs[i] = pgstore.CreateSchema(context.Background(), p, table) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("CreateSchema %d: %v", i, err)
		}
	}
}

// previousCompleteSQL is the completion of the versions before
// 005_complete.sql, which sent it inline; TestCompleteFunctionEquivalent
// checks that the function fences and writes exactly as it did.
const previousCompleteSQL = `
UPDATE dedupe_records SET
    status = 'COMPLETED', expires_at = $4::bigint, updated_at = $5::bigint,
    res_status = $6::integer, res_headers = $7::bytea, res_body = $8::bytea, res_omitted = $9::boolean,
    inflight = NULL, request_id = NULLIF($10::text, ''), trace = NULLIF($11::text, '')
WHERE key = $1::bytea AND owner = $2::text AND expires_at >= $3::bigint`

// TestCompleteFunctionEquivalent checks, on random rows and completions
// around every boundary (expiry equal to now, one before, one after; the
// owner's token and others; IN_PROGRESS and COMPLETED rows, rows of an
// earlier version without a first token, absent rows; results with and
// without headers, body and provenance, omitted or not), that the
// function of 005_complete.sql reports a completion exactly when the
// previous UPDATE affected a row and leaves the same row: the fence
// (owner token, expired-is-absent), first_token kept, provenance.
func TestCompleteFunctionEquivalent(t *testing.T) {
	p := newPool(t)
	ctx := context.Background()
	fnTable, stmtTable := newTable(t, p), newTable(t, p)
	seed := mrand.Uint64()
	t.Logf("seed %d", seed)
	rng := mrand.New(mrand.NewPCG(seed, seed))
	pick := func(xs ...string) string { return xs[rng.IntN(len(xs))] }
	const nowS = int64(2_000_000_000)
	nowMs := nowS * 1000
	read := func(table, key string) []any { return readRow(ctx, p, table, key) }
	completions := 0
	for i := range 400 {
		key := fmt.Sprintf("k%d", i)
		if rng.IntN(6) > 0 { // else absent
			status := pick("IN_PROGRESS", "COMPLETED")
			owner := pick("tok-a", "tok-b")
			firstToken, firstOwner := any(nil), any(nil)
			switch rng.IntN(3) {
			case 0: // this life
				firstToken, firstOwner = pick("tok-a", "tok-z"), owner
			case 1: // claimed by an earlier version since
				firstToken, firstOwner = "tok-z", "tok-y"
			}
			lease, expires := nowMs+int64(rng.IntN(3)-1), nowS+int64(rng.IntN(3)-1)
			for _, table := range []string{fnTable, stmtTable} {
				_, err := p.Exec(ctx, `INSERT INTO `+table+` (key, status, fingerprint, owner, lease_expires_at, expires_at,
					created_at, updated_at, res_status, res_body, inflight, first_token, first_token_owner, request_id, trace)
					VALUES ($1, $2, 'fp', $3, $4, $5, 1, 2, CASE WHEN $2 = 'COMPLETED' THEN 201 END,
					CASE WHEN $2 = 'COMPLETED' THEN 'old'::bytea END, CASE WHEN $2 = 'IN_PROGRESS' THEN true END, $6, $7, 'req-old', 'trace-old')`,
					[]byte(key), status, owner, lease, expires, firstToken, firstOwner)
				if err != nil {
					t.Fatal(err)
				}
			}
		}
		var headers, body []byte
		if rng.IntN(2) == 0 {
			headers = []byte{0, 0, 0, 1, 'x'}
		}
		if rng.IntN(2) == 0 {
			body = []byte("body")
		}
		args := []any{[]byte(key), pick("tok-a", "tok-b", "tok-c"), nowS, nowS + 3600, nowMs,
			int32(200 + rng.IntN(3)), headers, body, rng.IntN(4) == 0, pick("", "req-new"), pick("", "trace-new")}
		var done bool
		if err := p.QueryRow(ctx, strings.ReplaceAll(`SELECT dedupe_records_complete($1::bytea, $2::text, $3::bigint, $4::bigint,
			$5::bigint, $6::integer, $7::bytea, $8::bytea, $9::boolean, $10::text, $11::text)`, "dedupe_records", fnTable), args...).Scan(&done); err != nil {
			t.Fatal(err)
		}
		tag, err := p.Exec(ctx, strings.ReplaceAll(previousCompleteSQL, "dedupe_records", stmtTable), args...)
		if err != nil {
			t.Fatal(err)
		}
		if done != (tag.RowsAffected() == 1) {
			t.Errorf("seed %d, key %s, completion %v: function returned %v, previous statement affected %d rows", seed, key, args[1:], done, tag.RowsAffected())
		}
		if done {
			completions++
		}
		if got, want := read(fnTable, key), read(stmtTable, key); !reflect.DeepEqual(got, want) {
			t.Errorf("seed %d, key %s, completion %v: function left %v, previous statement %v", seed, key, args[1:], got, want)
		}
	}
	if completions == 0 || completions == 400 {
		t.Errorf("seed %d: %d of 400 completions applied; the draw should apply some and refuse some", seed, completions)
	}
}

// TestCompleteFunctionMissing checks that a store deployed on a table
// with migrations 001 to 004 but not 005_complete.sql fails loudly,
// naming the migration and not as a transient failure: its claim fails
// first, so no work runs whose completion would then fail, and a
// completion fails the same way.
func TestCompleteFunctionMissing(t *testing.T) {
	p := newPool(t)
	ctx := context.Background()
	table := "dedupetest_" + strings.ToLower(rand.Text()[:12])
	t.Cleanup(func() {
		p.Exec(context.Background(), "DROP TABLE IF EXISTS "+table)
		p.Exec(context.Background(), "DROP FUNCTION IF EXISTS "+table+"_claim")
		p.Exec(context.Background(), "DROP FUNCTION IF EXISTS "+table+"_complete")
	})
	for _, m := range []string{pgstore.Migration, pgstore.MigrationFirstToken, pgstore.MigrationProvenance, pgstore.MigrationFunctions} {
		if _, err := p.Exec(ctx, strings.ReplaceAll(m, "dedupe_records", table)); err != nil {
			t.Fatal(err)
		}
	}
	for _, mode := range []pgx.QueryExecMode{0, pgx.QueryExecModeExec, pgx.QueryExecModeSimpleProtocol} {
		s := newStore(t, p, pgstore.Options{Table: table, ExecMode: mode})
		missing := func(what string, err error) {
			t.Helper()
			if err == nil || !strings.Contains(err.Error(), "005_complete.sql") || !strings.Contains(err.Error(), table+"_complete ") ||
				errors.Is(err, dedupe.ErrStoreUnavailable) || errors.Is(err, dedupe.ErrLeaseLost) {
				t.Errorf("mode %s, %s without 005: got %v; want a permanent error naming %s_complete and 005_complete.sql", modeName(mode), what, err, table)
			}
		}
		_, err := s.Claim(ctx, claim("k", "fp", "tok", base))
		missing("Claim", err)
		if rec, err := s.Get(ctx, "k", base); !errors.Is(err, dedupe.ErrNotFound) {
			t.Errorf("mode %s: the failed claim wrote %+v, %v", modeName(mode), rec, err)
		}
		missing("Complete", s.Complete(ctx, dedupe.CompleteRequest{Key: "k", Token: "tok", Now: base, ExpiresAt: base.Add(time.Hour)}))
	}
	if err := pgstore.CreateSchema(ctx, p, table); err != nil {
		t.Fatal(err)
	}
	s := newStore(t, p, pgstore.Options{Table: table})
	if res, err := s.Claim(ctx, claim("k", "fp", "tok", base)); err != nil || !res.Acquired {
		t.Fatalf("Claim after CreateSchema: %+v, %v", res, err)
	}
	if err := s.Complete(ctx, dedupe.CompleteRequest{Key: "k", Token: "tok", Now: base, ExpiresAt: base.Add(time.Hour)}); err != nil {
		t.Errorf("Complete after CreateSchema: %v", err)
	}
}

// TestClaimNeverCallsComplete checks that the claim only names the
// completion function (to fail without 005) and never runs it: with the
// function replaced by one that raises, claims in every query mode still
// succeed, and completions fail.
func TestClaimNeverCallsComplete(t *testing.T) {
	p := newPool(t)
	ctx := context.Background()
	table := newTable(t, p)
	_, err := p.Exec(ctx, `CREATE OR REPLACE FUNCTION `+table+`_complete(
		p_key bytea, p_token text, p_now_s bigint, p_expires_s bigint, p_now_ms bigint,
		p_status integer, p_headers bytea, p_body bytea, p_omitted boolean, p_request_id text, p_trace text)
		RETURNS boolean LANGUAGE plpgsql AS $fn$ BEGIN RAISE EXCEPTION 'complete called'; END $fn$`)
	if err != nil {
		t.Fatal(err)
	}
	for i, mode := range []pgx.QueryExecMode{0, pgx.QueryExecModeExec, pgx.QueryExecModeSimpleProtocol} {
		s := newStore(t, p, pgstore.Options{Table: table, ExecMode: mode})
		k := fmt.Sprint("k", i)
		if res, err := s.Claim(ctx, claim(k, "fp", "tok", base)); err != nil || !res.Acquired {
			t.Errorf("mode %s: Claim = %+v, %v; want acquired without calling the completion function", modeName(mode), res, err)
		}
		if res, err := s.Claim(ctx, claim(k, "fp", "tok-2", base)); err != nil || res.Acquired {
			t.Errorf("mode %s: duplicate Claim = %+v, %v; want held", modeName(mode), res, err)
		}
		err := s.Complete(ctx, dedupe.CompleteRequest{Key: k, Token: "tok", Now: base, ExpiresAt: base.Add(time.Hour)})
		if err == nil || !strings.Contains(err.Error(), "complete called") {
			t.Errorf("mode %s: Complete = %v; want the raising function's error", modeName(mode), err)
		}
	}
}

// modeName names a query mode in messages; zero is the connection's own.
func modeName(m pgx.QueryExecMode) string {
	if m == 0 {
		return "default"
	}
	return m.String()
}

// readRow returns every column of key's row in table, or the error's text
// when there is none, for comparing two tables row by row.
func readRow(ctx context.Context, p *pgxpool.Pool, table, key string) []any {
	vals := make([]any, 17)
	ptrs := make([]any, len(vals))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	err := p.QueryRow(ctx, `SELECT status, fingerprint, owner, lease_expires_at, expires_at, created_at, updated_at,
		res_status, res_headers, res_body, res_omitted, request_id, trace, first_token, first_token_owner, inflight, key
		FROM `+table+` WHERE key = $1`, []byte(key)).Scan(ptrs...)
	if err != nil {
		return []any{err.Error()}
	}
	return vals
}
