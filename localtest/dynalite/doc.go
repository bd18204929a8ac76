// Package dynalite provides the test rig's DynamoDB-compatible server: it
// starts dynalite (https://github.com/architect/dynalite, pinned by
// localtest/package-lock.json) in memory on a loopback port, and tells tests
// which endpoint to use.
//
// Two entry points cover the two ways tests reach DynamoDB:
//
//   - [Endpoint] is for ordinary tests. It returns the endpoint in
//     AWS_ENDPOINT_URL_DYNAMODB, which `make test` sets (through
//     localtest/cmd/withdynalite) and which a user may point at DynamoDB
//     Local or a real table. Without it the test is skipped, or fails when
//     the CI environment variable is set, so CI never passes by skipping.
//   - [Start] is for tests that must control the server's life, such as the
//     end-to-end tests that stop the endpoint mid-run and bring it back with
//     [Server.Restart].
//
// dynalite is a Node.js program. Install it once with `make deps` (or
// `npm ci --prefix localtest`); [Start] reports [ErrNotInstalled] otherwise.
//
// Known dynalite gaps, which the stores must not depend on: it ignores
// ReturnValuesOnConditionCheckFailure, has no TTL API and never deletes
// expired items, and has no transactions.
//
// This package imports "testing" for [Endpoint]; like net/http/httptest, it
// is a helper meant to be imported by tests only.
package dynalite
