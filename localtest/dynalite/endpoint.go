package dynalite

import (
	"os"
	"testing"
)

// EnvEndpoint is the environment variable holding the DynamoDB endpoint
// URL. The AWS SDK for Go v2 reads it natively, so a client built with
// config.LoadDefaultConfig talks to that endpoint without extra code.
const EnvEndpoint = "AWS_ENDPOINT_URL_DYNAMODB"

// EnvCI is the environment variable that marks a CI run. When it is set to
// any non-empty value, [Endpoint] fails the test instead of skipping it.
const EnvCI = "CI"

// Endpoint returns the DynamoDB endpoint URL for a test that needs a
// DynamoDB-compatible server: the value of AWS_ENDPOINT_URL_DYNAMODB.
//
// When that variable is empty, Endpoint fails the test if CI is set, so
// that a CI run cannot pass by skipping the DynamoDB suites, and skips the
// test otherwise. `make test` sets the variable by running the tests under
// localtest/cmd/withdynalite.
//
// Endpoint does not check that the endpoint answers; a wrong endpoint
// makes the test's own requests fail.
func Endpoint(t testing.TB) string {
	t.Helper()
	if ep := os.Getenv(EnvEndpoint); ep != "" {
		return ep
	}
	if os.Getenv(EnvCI) != "" {
		t.Fatalf("dynalite endpoint required in CI: run make test (%s is not set)", EnvEndpoint)
		return ""
	}
	t.Skipf("%s is not set: run make test, or point it at dynalite or DynamoDB Local", EnvEndpoint)
	return ""
}
