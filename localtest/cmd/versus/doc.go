// Command versus measures the guard of an earlier commit and the guard of
// the working tree side by side, in one run on one DynamoDB endpoint, so
// that a latency regression shows as a ratio rather than as two figures
// taken on a machine whose load moved in between (`make versus
// REF=<commit>`).
//
// It exports REF with git archive into build/versus/base, renames that
// tree's module to github.com/lambda-dedupe/dedupebase, builds a small
// program (rig/main.go.txt) that imports both, and runs it against
// AWS_ENDPOINT_URL_DYNAMODB (`make versus` starts dynalite). The program
// creates each version's own default table (dynamostore.CreateTable) and
// sends, request after request in an order that rotates:
//
//   - a fresh request (a new key each time) through each guard;
//   - a replay of one completed record through each guard;
//   - each version's replay calls, recorded from one replay and resent
//     raw: what the server takes for them, without the guard;
//   - each version's fresh calls (its claim and its completion),
//     recorded from one fresh request and resent raw on that request's
//     key, which is deleted after each turn, untimed.
//
// Each fresh request's claim and completion are also timed at the client,
// so that a change in one call shows as that call's.
//
// It prints p50 and p90 per scenario, each ratio of the tree's p50 to the
// base's, and the guard's own time on a replay (the guarded replay's p50
// over its raw calls') for each version: a ratio above 1 with the guard's
// time unchanged is the server's, not the guard's. Its last line is each
// guard's p50 over its own calls' sent raw, fresh and replay: the ratio
// `make bench` holds each request to (its floor), for both versions in
// the same run, so that a change of the calls is told apart from a
// change of what the guard adds to them.
//
// REF must have the API the program uses: dedupe.New, dedupe.HTTPAPI,
// dedupe.HeaderReplayed, dynamostore.New with Options.Table and
// dynamostore.CreateTable, as every commit from 8181852 (issue 33) on has.
// Building the program resolves the union of both trees' modules, from
// the module cache or the Go module proxy.
//
// Flags: -ref (HEAD), -n (requests per scenario, 1000) and -short (5
// requests: a check that the comparison runs, which `make test` makes
// with REF HEAD in TestShort).
package main
