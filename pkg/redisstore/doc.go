// Package redisstore provides a dedupe.Store backed by Redis or Valkey.
//
// The store takes a narrow Client (*redis.Client, *redis.ClusterClient and
// *redis.Ring from github.com/redis/go-redis/v9 satisfy it) and never
// builds one itself: create the client once, at init, and pass it to New.
// It does not import the AWS SDK.
//
// # Layout
//
// One hash per record, at Options.Prefix + key, with the fields of
// dynamostore's item (see record.go): st, fp, tok, lease (epoch ms), exp
// (epoch s), cat, uat (epoch ms), ft (the first token of the record's
// life, dedupe.Record.FirstToken), and once COMPLETED rs, rh, rb, ro.
// Hashes written before ft existed read with an empty FirstToken.
// Redis strings are binary-safe: bodies are stored as they are, and
// headers in a length-prefixed encoding that keeps any byte of a value
// (JSON would not).
//
// # One round trip per call
//
// Claim, Complete, Release and Extend are each one Lua script (EVALSHA;
// EVAL the first time a server sees the script), run atomically by the
// server:
//
//   - Claim applies the contract's rule, dedupe.Record.FreeFor, to the
//     stored hash: free when absent or expired (exp < now, in epoch
//     seconds), or IN_PROGRESS with the caller's own token, or IN_PROGRESS
//     with its lease run out (lease < now, in epoch ms) and the caller's
//     fingerprint. Free, it writes the new record; not free, it returns the
//     existing hash, so a duplicate costs one round trip too. A claim of
//     an absent or expired key starts a new life (ft = the caller's
//     token); a takeover or the owner's own re-claim keeps the record's
//     life (its ft, or its tok on a hash without ft).
//   - Complete and Release act only while the hash carries the caller's
//     token (Complete also only while the record has not expired; Release
//     only while it is IN_PROGRESS). Release ends the lease (lease 0) and
//     keeps the record, so the key stays bound to its request.
//   - Extend (dedupe.LeaseExtender, for Config.Heartbeat) renews the
//     lease, the expiry and the server TTL only while the hash carries the
//     caller's token, is IN_PROGRESS, has not expired and its lease has
//     not run out.
//   - Get is one HGETALL.
//
// A fresh guarded request costs 2 round trips (claim, complete); a
// duplicate 1. Every script touches one key, so the store works on Redis
// Cluster: each record lives on the node that owns its slot (the
// contract suite runs on a three-master cluster too).
//
// All times come from the request (Now); the scripts never read the
// server's clock. An expired record counts as absent in every call even
// while the server still holds it.
//
// # Expiry without a reaper
//
// Every write sets the key's server TTL (PEXPIREAT) to the end of the
// record's ExpiresAt second plus Options.TTLMargin. A claim's ExpiresAt
// lies beyond its lease, so the TTL covers the lease and then the
// retention; a record whose invocation died disappears on its own:
//
//	claim           lease end        ExpiresAt   TTL (PEXPIREAT)
//	  |--- lease ------>|                 |  margin  |
//	  IN_PROGRESS       |                 |          | the server deletes it
//	                    | stranded: only the same request may take it
//	                    | over (same fingerprint); others get a mismatch
//	                                      | expired: absent to every call,
//	                                      | free for any request
//
//	complete                              ExpiresAt = complete + retention
//	  |--- COMPLETED, replayed ----------->|  margin  | deleted
//
// There is nothing for a reaper to do: DynamoDB needs one because its TTL
// deletes days late and its sparse index must be kept small, whereas Redis
// expires keys within moments of their TTL, and nothing here scans for
// stranded records. The margin guards against a server clock running
// ahead of the writers'; expiry as the contract sees it is always
// computed from the request's time.
//
// # Eviction and failover
//
// Every record carries a TTL, so any maxmemory-policy but noeviction (the
// volatile-* policies as much as the allkeys-* ones) may drop a live
// record, and a retry would run the work again. New reads the policy of
// every node the client reaches (CONFIG GET, else INFO memory where
// CONFIG is renamed or denied) and refuses any other with
// ErrEvictionPolicy; a node whose policy it cannot read is refused unless
// Options.NoEvictionVerified is set.
//
// Redis replicates asynchronously: a claim or completion acknowledged by a
// master that fails before its replica has it is lost when the replica is
// promoted, and the retry runs the work again. The store does not hide
// that with WAIT, which narrows the window without closing it; where a
// failover must not lose claims, use a store whose acknowledged writes
// survive one (MemoryDB, DynamoDB, PostgreSQL with synchronous
// replication). docs/stores.md has the details.
//
// # Result size
//
// Redis takes values up to 512 MB, but a result above
// Options.MaxResultBytes (default 400 KiB, DynamoDB's item limit, so that
// every store keeps the same results) is not stored: the record becomes
// COMPLETED with ResultOmitted and Complete returns an error wrapping
// dedupe.ErrResultTooLarge. Duplicates are refused with
// dedupe.ErrResultOmitted; the work never runs twice.
//
// # Errors
//
// Keys are checked with dedupe.CheckStoreKey (errors wrap
// dedupe.ErrKeyRejected) before anything is sent. Complete and Release
// without the token wrap dedupe.ErrLeaseLost. Network failures (refused,
// reset, EOF, timeouts), deadlines, an exhausted pool, and the replies
// LOADING, BUSY, TRYAGAIN, CLUSTERDOWN, MASTERDOWN, READONLY and "max
// number of clients reached" wrap dedupe.ErrStoreUnavailable, after the
// client's own retries (redis.Options.MaxRetries). Errors name keys by
// dedupe.KeyRef, never in full.
//
// A retried script is harmless: a claim that was applied but whose reply
// was lost is recognised by its token when the client resends it, and a
// completion or release resent with the same token writes the same
// record.
package redisstore
