// Command withdynalite runs a command with a DynamoDB-compatible endpoint in
// its environment, starting dynalite for it when needed.
//
// Usage:
//
//	go run ./localtest/cmd/withdynalite [-v] [-dynalite PATH] -- CMD [ARGS...]
//
// From another module, install it with
// `go install github.com/lambda-dedupe/dedupe/localtest/cmd/withdynalite@latest`
// and dynalite with `npm install --prefix ~/.dynalite dynalite`, then run
// `DYNALITE_BIN=~/.dynalite/node_modules/.bin/dynalite withdynalite -- go test ./...`.
// -dynalite (default $DYNALITE_BIN) names the dynalite executable;
// without either, it is localtest/node_modules/.bin/dynalite under the
// current module's root, as `make deps` installs it in this repository.
// To use any other endpoint (DynamoDB Local, LocalStack, a real table),
// set AWS_ENDPOINT_URL_DYNAMODB: nothing is started then.
//
// When AWS_ENDPOINT_URL_DYNAMODB is empty, withdynalite starts dynalite in
// memory on a free loopback port (see package localtest/dynalite; install it
// with `make deps`), sets AWS_ENDPOINT_URL_DYNAMODB to it, runs CMD, and
// stops dynalite when CMD exits or when withdynalite receives SIGINT or
// SIGTERM (which it passes on to CMD). When AWS_ENDPOINT_URL_DYNAMODB is
// already set, it starts nothing and runs CMD against that endpoint, so the
// same tests can run against DynamoDB Local or a real table.
//
// When the endpoint is dynalite or another loopback address, withdynalite
// also sets dummy credentials (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY) and
// AWS_REGION=us-east-1, each only if it is not already set. It leaves them
// alone for any other endpoint, where real credentials are needed.
//
// withdynalite exits with CMD's exit code (128+N when CMD died of signal N),
// 127 when CMD cannot be started, and 1 when dynalite cannot be started.
//
// The -v flag copies dynalite's own output to standard error.
package main
