// Package linearize checks that a dedupe.Store is linearizable against its
// executable specification, pkg/memstore, with the porcupine checker.
//
// [Check] runs concurrent clients, one store each, over a few keys. Each
// client draws Claim, Get, Complete, Release and (when the store
// implements dedupe.LeaseExtender) Extend calls with random fingerprints,
// tokens and times, so that fresh claims, takeovers, own-token re-claims,
// completions and releases by stale owners, and expiry all happen. Every
// call carries an explicit Now, so the model ([Model]) is deterministic:
// it applies each call with memstore's semantics to a per-key record.
//
// Faults are injected as package dedupetest's checker injects them, at the
// layer where they really happen (a dedupetest.Injector the store's client
// asks before each backend call): lost replies (applied, then the reply is
// lost and the client library sends the call again), throttles and
// timeouts. A call whose outcome is unknown (it returned a transient
// error) is recorded with an unknown output and a return time at
// infinity: it may have taken effect at any point after it was sent, or
// never. A call during which a reply was lost is recorded twice: once as
// the attempt that was applied and whose reply was lost (unknown output),
// once as the attempt that answered.
//
// See docs/linearizability.md for the model, the faults and the long run
// (DEDUPE_LINEARIZE_HISTORIES).
//
// This package imports "testing"; like net/http/httptest, it is meant to
// be imported by tests only.
package linearize
