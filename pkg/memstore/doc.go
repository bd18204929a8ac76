// Package memstore provides an in-memory dedupe.Store for unit tests, local
// development and single-process use.
//
// It obeys the full Store contract, expiry and owner-token fencing
// included, under one mutex and with no background goroutine: expired
// records are treated as absent on every call and dropped lazily when a
// call touches them. Records do not survive the process and are not shared
// between processes or Lambda execution environments, so it gives no
// protection across invocations in production.
package memstore
