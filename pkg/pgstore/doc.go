// Package pgstore provides a dedupe.Store backed by a PostgreSQL table,
// and the reaper that deletes its expired rows.
//
// The store takes a narrow Client (*pgxpool.Pool, *pgx.Conn and pgx.Tx
// from github.com/jackc/pgx/v5 satisfy it) and never opens connections
// itself: create the pool once, at init, and pass it to New. It does not
// import the AWS SDK.
//
// # Schema
//
// One row per key, in the table of migrations/001_dedupe_records.sql
// (Migration) with the columns migrations/002_first_token.sql adds
// (MigrationFirstToken) and those and the index migrations/003_provenance.sql
// adds (MigrationProvenance), the claim function of
// migrations/004_functions.sql (MigrationFunctions) and the completion
// function of migrations/005_complete.sql (MigrationComplete), both named
// after the table; CreateSchema applies all five. The columns are
// dynamostore's attributes:
//
//	column            type     meaning
//	key               bytea    the full key (primary key)
//	status            text     IN_PROGRESS or COMPLETED
//	fingerprint       text     request fingerprint
//	owner             text     owner token of the current claim (fencing)
//	lease_expires_at  bigint   lease end, epoch ms
//	expires_at        bigint   record expiry, epoch s (index)
//	created_at        bigint   claim time, epoch ms
//	updated_at        bigint   last write, epoch ms
//	res_status        integer  result status code
//	res_headers       bytea    result headers, length-prefixed, byte-exact
//	res_body          bytea    result body
//	res_omitted       boolean  COMPLETED without its result
//	inflight          boolean  true while in flight, false once Reap retired
//	                           the row (stranded), else NULL (partial indexes)
//	first_token       text     token of the claim that started the life (002)
//	first_token_owner text     owner when first_token was written (002)
//
// first_token (dedupe.Record.FirstToken) is read only while
// first_token_owner equals owner. A writer of an earlier version changes
// the owner without touching either column, so its rows read without a
// first token (Record.Life falls back to the owner), never with another
// life's.//
// Keys are stored as bytes, so every valid key (U+0000 included) fits.
// Times are integers from the writers' requests: no statement reads the
// server's clock, and an expired row counts as absent in every call even
// while it is still stored.
//
// # One statement per call
//
// Claim is one call of the table's PL/pgSQL function (MigrationFunctions),
// whose plans PostgreSQL caches per session, so that the claim is not
// planned again on every call where statements cannot be prepared
// (PgBouncer in transaction mode). The function reads the row by key and
// returns it when it is not free for the request (dedupe.Record.FreeFor:
// expired; IN_PROGRESS with the caller's token; IN_PROGRESS with its lease
// run out and the caller's fingerprint), so a duplicate writes and locks
// nothing; otherwise it inserts the row (INSERT … ON CONFLICT DO NOTHING,
// migration 005), and only when a row holds the key after all runs one
// INSERT … ON CONFLICT (key) DO UPDATE … WHERE statement whose conflict
// update applies only when the key is free for the request, and whose
// second CTE returns the existing row when it does not. A duplicate costs
// one round trip too. A claim of an absent or expired key starts a new
// life (first_token = the caller's token); a takeover or the owner's
// own re-claim keeps the row's. Complete is one call of the table's
// completion function (MigrationComplete), whose one UPDATE is fenced by
// the owner token and the record's expiry and whose plan is cached per
// session like the claim's; the claim names that function too, so a
// table without migration 005 fails its first claim, before any work
// runs. Release is one UPDATE fenced by the owner token; it ends the
// lease and keeps the row, so the key stays bound to its request. Extend (dedupe.LeaseExtender, for
// Config.Heartbeat) is one UPDATE fenced by the token, the IN_PROGRESS
// status, the expiry and the lease. Get is one SELECT by primary key. A
// fresh guarded request costs 2 round trips (claim, complete); a duplicate
// 1, except in a race with a first claim that commits while the duplicate
// runs (Store.Claim explains the extra round trip).
//
// Each statement is its own transaction; none uses session state. With
// the default query mode pgx prepares each statement once per connection;
// behind PgBouncer in transaction mode set Options.ExecMode to
// pgx.QueryExecModeExec or pgx.QueryExecModeSimpleProtocol (or add
// default_query_exec_mode=exec to the connection string). The contract
// suite runs in all three modes, and in the two PgBouncer-safe ones
// through PgBouncer in transaction mode.
//
// # Reaping
//
// Expired rows are absent to the store already; Store.Reap deletes them
// through the expires_at index, in bounded batches, so its cost follows
// what it deletes. Stranded rows (IN_PROGRESS, lease run out) are kept
// until they expire, because deleting one would let a different request
// take the key; Reap retires them from the partial in-flight index and
// counts them, so they can be alarmed on. Run it on a schedule.
//
// # Result size
//
// PostgreSQL takes values up to 1 GB, but a result above
// Options.MaxResultBytes (default 400 KiB, DynamoDB's item limit, so that
// every store keeps the same results) is not stored: the record becomes
// COMPLETED with res_omitted and Complete returns an error wrapping
// dedupe.ErrResultTooLarge. Duplicates are refused with
// dedupe.ErrResultOmitted; the work never runs twice.
//
// # Errors
//
// Keys are checked with dedupe.CheckStoreKey (errors wrap
// dedupe.ErrKeyRejected) before anything is sent. Complete and Release
// without the token wrap dedupe.ErrLeaseLost. Connection failures (refused,
// reset, EOF, SQLSTATE class 08), timeouts and deadlines (a pool with no
// free connection included), serialization_failure, deadlock_detected,
// too_many_connections, insufficient_resources, lock_not_available,
// query_canceled and the shutdown states 57P01 to 57P03 wrap
// dedupe.ErrStoreUnavailable; nothing else does. Errors name keys by
// dedupe.KeyRef, never in full.
//
// pgx never resends a statement. The store does (Options.Attempts, 3 in
// all by default) for transient failures: a claim resent after its reply
// was lost is recognised by its token, and a completion or release resent
// with the same token writes the same row.
package pgstore
