package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/lambda-dedupe/dedupe/internal/headerenc"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
)

// Client is what the store calls on PostgreSQL. *pgxpool.Pool, *pgx.Conn
// and pgx.Tx satisfy it; tests and wrappers (metrics, fault injection)
// may stand in for it.
type Client interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// DefaultMaxResultBytes matches DynamoDB's item limit (400 KB), so that a
// result one store keeps, every store keeps.
const DefaultMaxResultBytes = 400 << 10

// claimAttempts bounds how often Claim runs its statement when it finds
// a conflicting row it cannot read (see Store.Claim).
const claimAttempts = 3

// DefaultAttempts is how often a call is sent, in all, when it fails
// transiently and Options.Attempts is zero.
const DefaultAttempts = 3

// retryBackoff is the wait before the second attempt; it doubles for each
// further one.
const retryBackoff = 10 * time.Millisecond

// Options configures a Store. The zero value is usable: table
// dedupe_records, the connection's own query mode, the default size
// limit.
type Options struct {
	// Table is the table name, an unquoted lower-case identifier. Empty
	// means DefaultTable. Create it with CreateSchema or Migration.
	Table string

	// ExecMode, when not zero, is passed with every statement (pgx takes a
	// QueryExecMode as the first argument) and overrides the connection's
	// DefaultQueryExecMode. Behind PgBouncer in transaction mode, set
	// pgx.QueryExecModeExec or pgx.QueryExecModeSimpleProtocol here (or
	// default_query_exec_mode=exec in the connection string): the default,
	// QueryExecModeCacheStatement, keeps named prepared statements on the
	// server connection, which a transaction pooler does not preserve.
	// The store keeps no other session state.
	ExecMode pgx.QueryExecMode

	// MaxResultBytes bounds the stored size of a result (encoded headers
	// plus body). A larger result is not stored: the record becomes
	// COMPLETED with ResultOmitted, and Complete returns an error wrapping
	// dedupe.ErrResultTooLarge. Zero means DefaultMaxResultBytes; a
	// negative value means no limit (PostgreSQL takes up to 1 GB per
	// value).
	MaxResultBytes int

	// Attempts is how often a call is sent, in all, while it fails
	// transiently (dedupe.ErrStoreUnavailable), with 10 ms, then 20 ms,
	// and so on between attempts. pgx never resends a statement itself;
	// the store does, as the DynamoDB SDK and go-redis do, because its
	// calls are safe to resend: a claim, completion or release that was
	// applied but whose reply was lost is recognised by its token. Zero means DefaultAttempts; 1 sends
	// every call once.
	Attempts int
}

// Store is a dedupe.Store backed by one PostgreSQL table. Create it with
// New; it is safe for concurrent use and holds no goroutines.
type Store struct {
	c         Client
	table     string
	mode      pgx.QueryExecMode
	maxResult int
	attempts  int
	sql       statements
	claimFunc string // the claim function's name, for errors
	compFunc  string // the completion function's name, for errors
}

// statements are the store's SQL, with the table name in place.
type statements struct {
	claim, complete, release, extend, get, reapExpired, retireStranded string
}

var (
	_ dedupe.Store         = (*Store)(nil)
	_ dedupe.LeaseExtender = (*Store)(nil)
)

// New returns a Store that keeps records in opts.Table through c. It
// never reads the environment, opens connections or starts goroutines;
// create the pool once, at init (pgxpool.New), and the table once, with
// CreateSchema or your migrations.
func New(c Client, opts Options) (*Store, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: nil client", ErrInvalidOptions)
	}
	table := opts.Table
	if table == "" {
		table = DefaultTable
	}
	if !tableName.MatchString(table) {
		return nil, fmt.Errorf("%w: table %q is not a lower-case unquoted identifier of at most 40 bytes", ErrInvalidOptions, table)
	}
	if opts.Attempts < 0 {
		return nil, fmt.Errorf("%w: Attempts %d is negative", ErrInvalidOptions, opts.Attempts)
	}
	s := &Store{c: c, table: table, mode: opts.ExecMode, maxResult: opts.MaxResultBytes, attempts: opts.Attempts}
	if s.maxResult == 0 {
		s.maxResult = DefaultMaxResultBytes
	}
	if s.attempts == 0 {
		s.attempts = DefaultAttempts
	}
	s.claimFunc = forTable(claimFunction, table)
	s.compFunc = forTable(completeFunction, table)
	s.sql = statements{
		claim:          forTable(claimSQL, table),
		complete:       forTable(completeSQL, table),
		release:        forTable(releaseSQL, table),
		extend:         forTable(extendSQL, table),
		get:            forTable(getSQL, table),
		reapExpired:    forTable(reapExpiredSQL, table),
		retireStranded: forTable(retireStrandedSQL, table),
	}
	return s, nil
}

// send runs call until it succeeds, fails for good (not transiently), or
// has run s.attempts times. Every statement of the store is safe to send
// again after it may have been applied (see Options.Attempts).
func (s *Store) send(ctx context.Context, call func() error) error {
	wait := retryBackoff
	for attempt := 1; ; attempt++ {
		err := call()
		if err == nil || attempt >= s.attempts || !transient(err) {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		wait *= 2
	}
}

// args prepends the configured exec mode to args.
func (s *Store) args(args ...any) []any {
	if s.mode == 0 {
		return args
	}
	return append([]any{s.mode}, args...)
}

// recordColumns are the columns every read returns, in scan order. The
// first token is read only while first_token_owner = owner: a claim by a
// version before 002_first_token.sql changes the owner and leaves these
// columns as they were, and such a row has no first token rather than
// another life's.
const recordColumns = `status, fingerprint, owner, lease_expires_at, expires_at, created_at, updated_at,
       res_status, res_headers, res_body, res_omitted, request_id, trace,
       CASE WHEN first_token_owner = owner THEN first_token END`

// claimSQL is Claim's one statement: a call of the server-side function
// of migrations/004_functions.sql (MigrationFunctions), as
// migrations/005_complete.sql (MigrationComplete) replaces it, named
// after the table. The function first reads the row by key and, when it
// is there and not free for the request (dedupe.Record.FreeFor: expired,
// or IN_PROGRESS with the caller's token, or IN_PROGRESS with its lease
// run out and the caller's fingerprint), returns it, read-only. Otherwise
// it inserts the new row with INSERT … ON CONFLICT (key) DO NOTHING, and
// when a row holds the key after all (a free one, or one committed since
// the read) it runs one INSERT … ON CONFLICT (key) DO UPDATE … WHERE
// statement whose update applies only when the key is free for the
// request and whose second CTE returns the conflicting row, FOR SHARE,
// when it does not. PostgreSQL caches the function's plans per session,
// so the claim is planned once per server connection even in the query
// modes that cannot prepare statements (PgBouncer in transaction mode).
//
// The statement also names the completion function of
// migrations/005_complete.sql (MigrationComplete), as a regproc constant
// in a condition that is always true (true OR …): PostgreSQL looks the
// name up when it parses the statement, and the planner folds the
// condition away, so the function is never called and the check costs a
// catalog lookup by name (nothing measurable, even in exec mode where
// every call is parsed; a call of the function with typed NULLs in its
// place cost about 7 µs per claim there). On a table without 005 the
// claim fails (SQLSTATE 42883, reported by Store.Claim as a missing
// migration) before any work runs, instead of the work running and its
// completion failing.
//
// A claim of an absent or expired key starts a new life (first_token is
// the caller's token); a takeover or the owner's own re-claim keeps the
// row's life: its first_token (while first_token_owner = owner), else its
// owner.
//
//	$1 key  $2 fingerprint  $3 token  $4 lease_ms  $5 expires_s  $6 now_ms  $7 now_s  $8 request_id  $9 trace
const claimSQL = `SELECT * FROM dedupe_records_claim($1::bytea, $2::text, $3::text, $4::bigint, $5::bigint,
    $6::bigint, $7::bigint, $8::text, $9::text)
WHERE true OR 'dedupe_records_complete'::regproc IS NULL`

// claimFunction and completeFunction are the functions claimSQL and
// completeSQL call, as CreateSchema names them for DefaultTable.
const (
	claimFunction    = "dedupe_records_claim"
	completeFunction = "dedupe_records_complete"
)

// completeSQL is Complete's statement: a call of the server-side function
// of migrations/005_complete.sql (MigrationComplete), named after the
// table, which runs one UPDATE of the row fenced by the token and the
// record's expiry, takes the row out of the in-flight index, and returns
// whether it updated the row. PostgreSQL caches its plan per session, as
// the claim's.
//
//	$1 key  $2 token  $3 now_s  $4 expires_s  $5 now_ms  $6 status  $7 headers  $8 body  $9 omitted
//	$10 request_id  $11 trace
const completeSQL = `SELECT dedupe_records_complete($1::bytea, $2::text, $3::bigint, $4::bigint, $5::bigint,
    $6::integer, $7::bytea, $8::bytea, $9::boolean, $10::text, $11::text)`

// releaseSQL is Release's statement, fenced by the token: it ends the
// lease of an IN_PROGRESS row and takes it out of the in-flight index,
// keeping the row and its fingerprint until it expires.
const releaseSQL = `
UPDATE dedupe_records SET lease_expires_at = 0, inflight = NULL
WHERE key = $1::bytea AND owner = $2::text AND status = 'IN_PROGRESS'`

// extendSQL is Extend's statement, fenced like the contract says: by the
// token, the IN_PROGRESS status, the record's expiry and its lease. The
// row stays in the in-flight index with its later lease end.
//
//	$1 key  $2 token  $3 now_ms  $4 lease_ms  $5 expires_s  $6 now_s
const extendSQL = `
UPDATE dedupe_records SET lease_expires_at = $4::bigint, expires_at = $5::bigint, updated_at = $3::bigint
WHERE key = $1::bytea AND owner = $2::text AND status = 'IN_PROGRESS'
  AND expires_at >= $6::bigint AND lease_expires_at >= $3::bigint`

// getSQL is Get's statement; expiry is checked on the row read.
const getSQL = `SELECT ` + recordColumns + ` FROM dedupe_records WHERE key = $1::bytea`

// Claim implements dedupe.Store with one statement (claimSQL), a call of
// the table's claim function (MigrationFunctions), which returns the new
// record or the existing one. A duplicate of a record that is not free
// for the request is answered from a plain read by key: it writes and
// locks nothing. The table needs migrations 001 to 004 (CreateSchema);
// without 004 every claim fails with an error that says so.
//
// One race costs more: when the conflicting row was inserted by a claim
// that committed after the claim's snapshot was taken, the statement
// cannot see the row it conflicted with (PostgreSQL's READ COMMITTED
// rules) and returns nothing. Claim then calls the function again, up to
// three times in all; a row still unseen (it was deleted meanwhile)
// yields Acquired false with a zero Record, as the contract allows.
//
// A claim that does take the key, or finds it free but loses it to a
// concurrent claim, locks the row for the statement's length (ON
// CONFLICT DO UPDATE locks the row it conflicts with even when its WHERE
// is false); the lock is released when the statement ends.
func (s *Store) Claim(ctx context.Context, req dedupe.ClaimRequest) (dedupe.ClaimResult, error) {
	if err := dedupe.CheckStoreKey(req.Key); err != nil {
		return dedupe.ClaimResult{}, fmt.Errorf("pgstore: claim: %w", err)
	}
	nowMs := req.Now.UnixMilli()
	args := s.args([]byte(req.Key), req.Fingerprint, req.Token,
		req.LeaseUntil.UnixMilli(), req.ExpiresAt.Unix(), nowMs, req.Now.Unix(), req.RequestID, req.Trace)
	for range claimAttempts {
		var acquired bool
		var row rowValues
		err := s.send(ctx, func() error {
			return s.c.QueryRow(ctx, s.sql.claim, args...).Scan(append([]any{&acquired}, row.dest()...)...)
		})
		if errors.Is(err, pgx.ErrNoRows) {
			continue
		}
		if err != nil {
			return dedupe.ClaimResult{}, s.claimErr(req.Key, err)
		}
		rec, err := row.record(req.Key)
		if err != nil {
			return dedupe.ClaimResult{}, fmt.Errorf("pgstore: claim %s: %w", dedupe.KeyRef(req.Key), err)
		}
		return dedupe.ClaimResult{Acquired: acquired, Record: rec}, nil
	}
	return dedupe.ClaimResult{}, nil
}

// claimErr wraps a failed claim of key, naming the missing migration when
// a function the claim names does not exist (SQLSTATE 42883,
// undefined_function).
//
// A claim that waited past lock_timeout (SQLSTATE 55P03,
// lock_not_available, after the store's attempts) waited for the lock on
// that very key's row: a concurrent writer of the key holds it, such as
// the first request's transaction when the store runs on a pgx.Tx. That
// is an answer, reported as dedupe.ErrInProgress (409), never as
// dedupe.ErrStoreUnavailable, on which Config.FailOpen would run the
// work beside it. (A table lock held by DDL gives the same code; 409 with
// Retry-After is the safe reading of it.)
func (s *Store) claimErr(key string, err error) error {
	if m := s.missingMigration(err); m != "" {
		return fmt.Errorf("pgstore: claim %s: %s: %w", dedupe.KeyRef(key), m, err)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == lockNotAvailable {
		return fmt.Errorf("pgstore: claim %s: another writer holds the key's row past lock_timeout: %w: %v", dedupe.KeyRef(key), dedupe.ErrInProgress, err)
	}
	return wrapErr("claim", key, err)
}

// lockNotAvailable is SQLSTATE 55P03, lock_not_available.
const lockNotAvailable = "55P03"

// missingMigration returns what to do when err reports that the table's
// claim or completion function does not exist (SQLSTATE 42883,
// undefined_function), naming the migration that creates it, or "" for
// any other error. Such an error is permanent, never transient.
func (s *Store) missingMigration(err error) string {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "42883" {
		return ""
	}
	var fn, migration string
	switch { // "function t_claim(bytea, …) does not exist", "function "t_complete" does not exist"
	case strings.Contains(pgErr.Message, s.claimFunc+"("), strings.Contains(pgErr.Message, `"`+s.claimFunc+`"`):
		fn, migration = s.claimFunc, "migrations/004_functions.sql (pgstore.MigrationFunctions) and 005_complete.sql (pgstore.MigrationComplete)"
	case strings.Contains(pgErr.Message, s.compFunc+"("), strings.Contains(pgErr.Message, `"`+s.compFunc+`"`):
		fn, migration = s.compFunc, "migrations/005_complete.sql (pgstore.MigrationComplete)"
	default:
		return ""
	}
	return fmt.Sprintf("function %s is missing: apply %s for table %s, or run pgstore.CreateSchema, before deploying this version",
		fn, migration, s.table)
}

// Complete implements dedupe.Store with one statement (completeSQL), a
// call of the table's completion function (MigrationComplete), which runs
// one UPDATE fenced by the owner token and the record's expiry. A result
// above Options.MaxResultBytes is not stored: the record is completed
// with ResultOmitted, and Complete returns an error wrapping
// dedupe.ErrResultTooLarge. Without migration 005 it fails with an error
// that names it (and so does every claim, first).
func (s *Store) Complete(ctx context.Context, req dedupe.CompleteRequest) error {
	if err := dedupe.CheckStoreKey(req.Key); err != nil {
		return fmt.Errorf("pgstore: complete: %w", err)
	}
	var headers, body []byte
	omitted, tooLarge := req.OmitResult, 0
	if !omitted {
		headers, body = headerenc.Encode(req.Result.Headers), req.Result.Body
		if size := len(headers) + len(body); s.maxResult > 0 && size > s.maxResult {
			headers, body, omitted, tooLarge = nil, nil, true, size
		}
	}
	if len(body) == 0 {
		body = nil // stored as NULL
	}
	args := s.args([]byte(req.Key), req.Token, req.Now.Unix(),
		req.ExpiresAt.Unix(), req.Now.UnixMilli(), int32(req.Result.StatusCode), headers, body, omitted,
		req.RequestID, req.Trace)
	var done bool
	err := s.send(ctx, func() error {
		return s.c.QueryRow(ctx, s.sql.complete, args...).Scan(&done)
	})
	switch {
	case err != nil:
		if m := s.missingMigration(err); m != "" {
			return fmt.Errorf("pgstore: complete %s: %s: %w", dedupe.KeyRef(req.Key), m, err)
		}
		return wrapErr("complete", req.Key, err)
	case !done:
		return fmt.Errorf("pgstore: complete %s: %w", dedupe.KeyRef(req.Key), dedupe.ErrLeaseLost)
	case tooLarge > 0:
		return fmt.Errorf("pgstore: complete %s: result of %d bytes exceeds %d, stored without it: %w",
			dedupe.KeyRef(req.Key), tooLarge, s.maxResult, dedupe.ErrResultTooLarge)
	}
	return nil
}

// Release implements dedupe.Store with one UPDATE fenced by the owner
// token and the IN_PROGRESS status. It ends the lease at once (0) and
// clears inflight: a retry of the same request takes the key right away,
// a different request is still refused, and Reap has nothing to retire.
func (s *Store) Release(ctx context.Context, key, token string) error {
	if err := dedupe.CheckStoreKey(key); err != nil {
		return fmt.Errorf("pgstore: release: %w", err)
	}
	var tag pgconn.CommandTag
	err := s.send(ctx, func() (err error) {
		tag, err = s.c.Exec(ctx, s.sql.release, s.args([]byte(key), token)...)
		return err
	})
	switch {
	case err != nil:
		return wrapErr("release", key, err)
	case tag.RowsAffected() == 0:
		return fmt.Errorf("pgstore: release %s: %w", dedupe.KeyRef(key), dedupe.ErrLeaseLost)
	}
	return nil
}

// Extend implements dedupe.LeaseExtender with one UPDATE (extendSQL)
// fenced by the owner token, the IN_PROGRESS status, the record's expiry
// and its lease: it renews the lease and the expiry only while the row
// carries req.Token, is in progress, has not expired and its lease has
// not run out at req.Now. Otherwise it returns an error wrapping
// dedupe.ErrLeaseLost and changes nothing. Resent after a lost reply, it
// finds its own renewal and applies it again.
func (s *Store) Extend(ctx context.Context, req dedupe.ExtendRequest) error {
	if err := dedupe.CheckStoreKey(req.Key); err != nil {
		return fmt.Errorf("pgstore: extend: %w", err)
	}
	args := s.args([]byte(req.Key), req.Token, req.Now.UnixMilli(),
		req.LeaseUntil.UnixMilli(), req.ExpiresAt.Unix(), req.Now.Unix())
	var tag pgconn.CommandTag
	err := s.send(ctx, func() (err error) {
		tag, err = s.c.Exec(ctx, s.sql.extend, args...)
		return err
	})
	switch {
	case err != nil:
		return wrapErr("extend", req.Key, err)
	case tag.RowsAffected() == 0:
		return fmt.Errorf("pgstore: extend %s: %w", dedupe.KeyRef(req.Key), dedupe.ErrLeaseLost)
	}
	return nil
}

// Get implements dedupe.Store with one SELECT by primary key. A row whose
// expires_at is before now (Reap deletes expired rows later, if at all) is
// reported as dedupe.ErrNotFound.
func (s *Store) Get(ctx context.Context, key string, now time.Time) (dedupe.Record, error) {
	if err := dedupe.CheckStoreKey(key); err != nil {
		return dedupe.Record{}, fmt.Errorf("pgstore: get: %w", err)
	}
	var row rowValues
	err := s.send(ctx, func() error {
		return s.c.QueryRow(ctx, s.sql.get, s.args([]byte(key))...).Scan(row.dest()...)
	})
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return dedupe.Record{}, fmt.Errorf("pgstore: get %s: %w", dedupe.KeyRef(key), dedupe.ErrNotFound)
	case err != nil:
		return dedupe.Record{}, wrapErr("get", key, err)
	}
	rec, err := row.record(key)
	if err != nil {
		return dedupe.Record{}, fmt.Errorf("pgstore: get %s: %w", dedupe.KeyRef(key), err)
	}
	if rec.Expired(now) {
		return dedupe.Record{}, fmt.Errorf("pgstore: get %s: expired: %w", dedupe.KeyRef(key), dedupe.ErrNotFound)
	}
	return rec, nil
}

// rowValues receives recordColumns.
type rowValues struct {
	status, fingerprint, owner       string
	lease, expires, created, updated int64
	resStatus                        *int32
	resHeaders, resBody              []byte
	resOmitted                       bool
	requestID, trace                 *string
	firstToken                       *string
}

// dest returns the scan destinations, in recordColumns order.
func (v *rowValues) dest() []any {
	return []any{&v.status, &v.fingerprint, &v.owner, &v.lease, &v.expires, &v.created, &v.updated,
		&v.resStatus, &v.resHeaders, &v.resBody, &v.resOmitted, &v.requestID, &v.trace, &v.firstToken}
}

// record turns the scanned row of key into a Record. pgx allocates the
// scanned byte slices anew per row, so the Record shares no memory with
// anything else.
func (v *rowValues) record(key string) (dedupe.Record, error) {
	rec := dedupe.Record{
		Key:            key,
		Status:         dedupe.Status(v.status),
		Fingerprint:    v.fingerprint,
		Token:          v.owner,
		LeaseExpiresAt: time.UnixMilli(v.lease).UTC(),
		ExpiresAt:      time.Unix(v.expires, 0).UTC(),
		CreatedAt:      time.UnixMilli(v.created).UTC(),
		UpdatedAt:      time.UnixMilli(v.updated).UTC(),
	}
	if v.requestID != nil {
		rec.RequestID = *v.requestID
	}
	if v.trace != nil {
		rec.Trace = *v.trace
	}
	if v.firstToken != nil {
		rec.FirstToken = *v.firstToken
	}
	switch rec.Status {
	case dedupe.StatusInProgress:
	case dedupe.StatusCompleted:
		if v.resOmitted {
			rec.ResultOmitted = true
			break
		}
		r := dedupe.Result{Body: v.resBody}
		if v.resStatus != nil {
			r.StatusCode = int(*v.resStatus)
		}
		h, err := headerenc.Decode(v.resHeaders)
		if err != nil {
			return dedupe.Record{}, fmt.Errorf("%w: res_headers: %v", ErrMalformedRecord, err)
		}
		r.Headers = h
		rec.Result = &r
	default:
		return dedupe.Record{}, fmt.Errorf("%w: status %q", ErrMalformedRecord, v.status)
	}
	return rec, nil
}
