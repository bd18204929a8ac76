// Command dedupe is the operator's tool for the idempotency records of
// pkg/dedupe, over every store: DynamoDB (--table, --endpoint), Redis or
// Valkey (--redis) and PostgreSQL (--postgres).
//
//	dedupe key       compute a stored key and its KeyRef, from parts or a saved event
//	dedupe show      print a record, from a log line's key:<12 hex> (no Scan) or its key
//	dedupe inflight  list in-flight records (dedupe stranded: only stranded ones)
//	dedupe release   end a stuck lease, fenced by the owner token
//	dedupe forget    delete a completed record so that its key runs again
//
// Run "dedupe help" for the flags, and see docs/operating.md, the
// runbook. The logic lives in package cli; this is its thin main.
package main
