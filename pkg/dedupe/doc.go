// Package dedupe provides exactly-once effects over at-least-once delivery
// for AWS Lambda functions written in Go.
//
// A Guard claims an idempotency key in a Store before running the work it
// protects, stores the work's result, and answers every retry with that
// result instead of running the work again. The Store interface is the
// contract between the state machine here and a backend: pkg/memstore
// keeps records in memory, pkg/dynamostore in DynamoDB, and
// pkg/dedupe/dedupetest checks any backend against the contract.
//
// Every claim gets a fresh owner token, and only that owner may complete or
// release the record, so an invocation that timed out can never overwrite
// the result of the invocation that took its key over.
//
// This package imports no AWS SDK.
package dedupe
