// Command reaper is the scheduled Lambda that clears stranded in-flight
// dedupe records: IN_PROGRESS records whose invocation died (timeout,
// crash) and that no retry took over. It runs dynamostore.Store.Reap once
// per invocation, logs one line per cleared record, emits the counts as
// CloudWatch Embedded Metric Format (namespace Dedupe, dimension
// FunctionName: StrandedFound, StrandedCleared, StrandedSkipped,
// ReapErrors), and returns the dynamostore.ReapReport as its result.
//
// Environment: IDEMPOTENCY_TABLE (required), REAPER_SHARDS (the store's
// shard count, default 8), REAPER_GRACE (default 30s), REAPER_WARN_AGE
// (default 15m), LOG_LEVEL (default INFO). AWS_ENDPOINT_URL_DYNAMODB
// points the SDK at a local endpoint.
package main
