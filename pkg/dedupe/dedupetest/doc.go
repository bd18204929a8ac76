// Package dedupetest provides the contract suite every dedupe.Store must
// pass, in the spirit of testing/slogtest.
//
// A backend's test calls Run with a constructor; the same cases then run
// against memstore, dynamostore, or any new store, so all of them agree on
// claims, expiry, lease takeover, fencing and concurrency.
package dedupetest
