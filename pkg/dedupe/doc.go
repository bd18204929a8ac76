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
// Each job has one entry point (docs/entry-points.md): the HTTP adapters
// (HTTPAPI, RESTAPI, FunctionURL, Middleware), the batch adapters (SQS,
// Kinesis, DynamoDBStream), Handler for a whole typed Lambda handler,
// Once for a typed piece of work, and Guard.Do, the primitive all of them
// are built on.
//
// Key and Fingerprint mean one thing throughout. In the configuration of
// an entry point (HTTPConfig, SQSConfig, KinesisConfig,
// DynamoDBStreamConfig, HandlerConfig), Key selects the idempotency key
// from the event, and Fingerprint selects what of the event identifies
// the request, which the entry point hashes (see the function
// Fingerprint); nil or empty means the entry point's documented default.
// In the guard's own types (Call, ClaimRequest, Record), Key is the key
// itself and Fingerprint that hash.
//
// This package imports no AWS SDK.
package dedupe
