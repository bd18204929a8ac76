// Command bench measures dedupe in one run, side by side, and prints a
// table a user can trust on a noisy machine: wherever absolute figures
// would mostly measure the machine, it reports ratios taken in the same
// run.
//
// It measures:
//
//   - the guard's in-process overhead through the HTTP API adapter over
//     memstore (testing.Benchmark): ns/op and allocs/op for a fresh
//     request, a replay and a replay from the warm-container cache;
//   - against DynamoDB (AWS_ENDPOINT_URL_DYNAMODB, else a dynalite it
//     starts): p50/p99 latency, throughput and DynamoDB calls per request
//     for a bare handler and the same handler guarded, for fresh requests,
//     replays (cache off and on) and in-flight conflicts; the ratio of a
//     guarded fresh request's extra latency to its two writes (the
//     claim's and the completion's UpdateItem, recorded from a guarded
//     request and sent again by hand in the same run), and of a guarded
//     replay's to the raw calls it makes (the claim's UpdateItem failing
//     on a completed record, and the GetItem of a server that returns no
//     item with the failure). A floor of the guard's own calls shows what
//     the guard adds, not what a change of those calls costs: `make
//     versus` (localtest/cmd/versus) measures that against a commit;
//   - waited duplicates: 100 concurrent requests on one key whose handler
//     takes 50 ms, with Config.Wait on: how many got the 201 replay, and
//     the most extra reads any of them made;
//   - duplicates that wait: 100 concurrent requests on one key whose
//     handler takes 50 ms, 1 s and 5 s, with Config.Wait of 10 s: the
//     share answered with the result, the reads per waiting duplicate
//     (mean, max, and the documented budget) and how late after the
//     first request finished they were answered;
//   - calls per replay on moto_server, which returns the item with a
//     failed condition as DynamoDB does, when moto_server is on the PATH
//     (it says so when it is not);
//   - through the local stack (the gateway and the api function's real
//     bootstrap under the Lambda Runtime Interface Emulator): requests/s
//     and p99 of fresh and replayed payments at 1, 4 and 8 clients, the
//     cold start of a new environment, and the size of the linux/arm64
//     bootstrap.
//   - DynamoDB capacity units and calls per fresh request, replay, failed
//     request (its handler fails) and retry after a failure, for responses
//     of 300 B, 4 KB, 10 KB and 100 KB, in the default mode and in
//     dynamostore's Lean mode, each on a table keyed by reference (the
//     default) and on a classic one, and for Powertools' idempotency utility
//     (its calls, made by hand), computed by AWS's rules from the items
//     actually written (localtest/capacity.Measure), with the on-demand
//     price of a million of each, and the cold-start cost of New's
//     global-table check (one DescribeTable).
//
// Flags: -out (build/bench), -n (requests per latency scenario, 300) and
// -short: every scenario at a few requests each, a check that the bench
// runs rather than a measurement; `make test` runs it (TestShort).
package main
