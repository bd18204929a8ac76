// Package dynamotest provides the set-up that tests on a DynamoDB-compatible
// endpoint share: a client for the test endpoint ([Client]), and the tables
// of template.yaml created under names unique to the test and deleted when
// it ends ([CreateTables]), so that tests run on the deployed schema and
// never see each other's items. [IdempotencyTable] creates the
// idempotency table from the schema built into pkg/dynamostore
// (dynamostore.TableInput) and reads no template: it is the one for tests
// in other modules, whatever their template.yaml declares.
//
// From another module, start a local server with withdynalite (see
// localtest/cmd/withdynalite: -dynalite or DYNALITE_BIN name a dynalite
// install) or point AWS_ENDPOINT_URL_DYNAMODB at any DynamoDB-compatible
// endpoint (DynamoDB Local, LocalStack).
//
// The endpoint comes from AWS_ENDPOINT_URL_DYNAMODB through
// [github.com/lambda-dedupe/dedupe/localtest/dynalite.Endpoint]: without it
// the test is skipped, or fails when the CI environment variable is set.
// [ServerKind] names the server behind it (dynalite, moto, or another
// endpoint), as localtest/cmd/withdynalite reports it in
// DEDUPE_DYNAMODB_SERVER, so that a test can expect each server's
// documented behaviour where they differ.
//
// This package imports "testing"; like net/http/httptest, it is a helper
// meant to be imported by tests only. It imports package infra, so infra's
// own tests may use it only from the external package infra_test.
package dynamotest
