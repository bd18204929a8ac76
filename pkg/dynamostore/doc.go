// Package dynamostore provides a dedupe.Store backed by a DynamoDB table,
// and the reaper that clears in-flight records whose invocation died.
//
// Keys longer than dedupe.MaxStoreKeyBytes (DynamoDB's 2048-byte partition
// key limit) or not valid UTF-8 are refused before any call, with an error
// wrapping dedupe.ErrKeyRejected; the guard never sends one. Errors and
// log lines name keys by dedupe.KeyRef, never in full.
//
// The store takes a narrow Client (a *dynamodb.Client satisfies it) and
// never loads AWS configuration itself: build the client once, at init,
// with config.LoadDefaultConfig and dynamodb.NewFromConfig. The SDK honours
// AWS_ENDPOINT_URL_DYNAMODB, so the same code talks to dynalite or DynamoDB
// Local in tests.
//
// # Schema
//
// One item per key. The default attribute names (DefaultAttributes) match
// template.yaml; Options.Attributes renames them and Options.SortKey adds a
// fixed sort key for single-table designs (classic tables only). A table
// is keyed by reference (TableInput, template.yaml) or classic
// (ClassicTableInput, tables before v0.2.0); New reads which (see
// KeySchema).
//
//	attribute         type  meaning
//	ref               S     dedupe.KeyRef of the key: the partition key
//	                        keyed by reference; on a classic table the
//	                        key of the KEYS_ONLY index ref
//	pk                S     full key: the sort key keyed by reference
//	                        (shortened above MaxPlainSortKey bytes), the
//	                        partition key on a classic table
//	long_key          S     the full key beside a shortened pk
//	status            S     IN_PROGRESS or COMPLETED
//	fingerprint       S     request fingerprint
//	owner             S     owner token of the current claim (fencing)
//	lease_expires_at  N     lease end, epoch ms (sort key of index inflight)
//	expires_at        N     record expiry, epoch s (the TTL attribute)
//	created_at        N     claim time, epoch ms
//	updated_at        N     last write, epoch ms
//	res_status        N     result status code
//	res_headers       B     result headers, binary-safe (absent when none;
//	                        S JSON in records of earlier versions, still read)
//	res_body          B     result body (absent when empty)
//	res_encoding      S     "gzip" or "identity"
//	res_omitted       BOOL  COMPLETED without result: it was too large
//	res_object        M     instead of res_body, where a body too large for
//	                        the item is stored in S3 (LargeResults): bucket,
//	                        key, size, sha256
//	inflight_shard    N     fnv32a(key) mod Shards while IN_PROGRESS;
//	                        -1 - that once Reap retired the record
//	                        (stranded); absent once completed or released
//
// The global secondary index inflight (partition key inflight_shard, sort
// key lease_expires_at, projecting owner, status and created_at, and
// long_key on a table keyed by reference) is sparse: Complete and Release
// remove inflight_shard, so the index holds in-flight records only (and
// the stranded ones Reap retired, until they expire) and Reap's cost
// grows with what is in flight, not with the table.
//
// # Calls per request
//
// Claim is one conditional PutItem when the key starts a new life (absent
// or expired), and a second PutItem, fenced on the record it replaces,
// when it takes over a stranded record or re-claims its own: a PutItem
// cannot keep an attribute of the item it replaces, so the takeover must
// read the record's life (first_token) first (Store.Claim explains it);
// Extend and Complete one conditional UpdateItem each;
// Release one conditional UpdateItem (it ends the lease and keeps the
// record); Get one strongly consistent GetItem;
// Reap one Query per index page and one conditional UpdateItem per
// stranded record.
// New calls DescribeTable once, unless Options.GlobalTables is
// GlobalTablesUnchecked (see Global tables below); it reads the key schema
// from the same answer.
// A fresh guarded request costs 2 calls (claim, complete). A duplicate
// costs 1 on DynamoDB, which returns the existing item with the failed
// condition (ReturnValuesOnConditionCheckFailure ALL_OLD). Servers that
// ignore ALL_OLD (dynalite, older DynamoDB Local builds) cost one more: a
// consistent GetItem. If the record vanished between the two calls, Claim
// reports Acquired false with a zero Record and the guard claims again.
//
// # Expiry
//
// DynamoDB's TTL deletes expired items lazily, sometimes days late, and
// dynalite never does. Every condition and read therefore compares
// expires_at with the request's time: an expired record is absent to
// Claim, Get and Complete even while it is still stored.
//
//	claim            lease end        complete           expires_at
//	  |-- lease ------->|                 |                  |
//	  IN_PROGRESS, in the index           COMPLETED, out of the index
//	                    |-- grace -->|
//	                    a retry of the same request may take over from
//	                    here (a different one gets 422 until expires_at);
//	                    Reap retires it from the index from here if nobody
//	                    did, and TTL deletes it at expires_at
//
// # Item size
//
// DynamoDB items are limited to 400 KB. Bodies above Options.CompressAbove
// (4 KiB) are stored gzip-compressed when that makes them smaller. If the
// completed item would still exceed Options.MaxItemBytes (400 KB minus a 2
// KiB margin), or DynamoDB refuses it as too large, Complete stores the
// record as COMPLETED with res_omitted true and no result, and returns an
// error wrapping dedupe.ErrResultTooLarge. The work is never run again for
// that key: a duplicate gets dedupe.ErrResultOmitted from the guard.
// With Options.LargeResults, such a body is stored as an S3 object
// instead, under a name unique to the owner token and written before the
// fenced completion, and replayed byte for byte after its size and SHA-256
// are checked (see LargeResults).
//
// # Global tables
//
// A claim is a conditional write, atomic in one Region. On a global table
// in multi-Region eventual consistency, the same key claimed in two
// Regions at once runs twice. New therefore describes the table and
// refuses one with replicas that is not in multi-Region strong consistency
// (Options.GlobalTables: refuse by default, warn, or skip the check); a
// DescribeTable that fails transiently at New is retried on the store's
// calls instead of failing init. On an MRSC table,
// ReplicatedWriteConflictException is retried (ConflictAttempts); a claim
// that still meets it reports a concurrent writer (dedupe.ErrInProgress).
//
// # Cost and Lean
//
// By AWS's capacity rules a fresh request with a small response costs 4
// write units on a table keyed by reference: the claim and the completion,
// and the in-flight index's entry written on the claim and removed on the
// completion (a classic table's ref index entry, written on the claim,
// makes 5); a replay or a conflict costs 1 (ItemSize, WriteUnits,
// ReadUnits; docs/cost.md). Options.Lean writes no in-flight index entry
// (2 units per fresh request, 3 on a classic table), for deployments that
// run no reaper.
//
// # Errors
//
// Conditional failures of Complete and Release wrap dedupe.ErrLeaseLost.
// Throttling (ProvisionedThroughputExceeded, ThrottlingException,
// RequestLimitExceeded), server faults (InternalServerError,
// ServiceUnavailable), network failures and deadlines wrap
// dedupe.ErrStoreUnavailable, after the SDK's own retryer has retried
// them; configure retries on the client (dynamodb.Options.Retryer). That
// is only when no answer about the key was received: what a claim learnt
// before a later step failed is reported as what it is (a record whose
// body in S3 cannot be read, a concurrent writer), never as unavailable.
// docs/options.md lists every error path and its classification.
package dynamostore
