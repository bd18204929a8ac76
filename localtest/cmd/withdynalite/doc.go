// Command withdynalite runs a command with a DynamoDB-compatible endpoint in
// its environment, starting dynalite or moto_server for it when needed.
//
// Usage:
//
//	go run ./localtest/cmd/withdynalite [-v] [-server dynalite|moto|URL] [-dynalite PATH] -- CMD [ARGS...]
//
// From another module, install it with
// `go install github.com/lambda-dedupe/dedupe/localtest/cmd/withdynalite@latest`
// and dynalite with `npm install --prefix ~/.dynalite dynalite`, then run
// `DYNALITE_BIN=~/.dynalite/node_modules/.bin/dynalite withdynalite -- go test ./...`.
// -dynalite (default $DYNALITE_BIN) names the dynalite executable;
// without either, it is localtest/node_modules/.bin/dynalite under the
// current module's root, as `make deps` installs it in this repository.
//
// The server is the -server flag, else the DEDUPE_DYNAMODB environment
// variable, else the endpoint already in AWS_ENDPOINT_URL_DYNAMODB, else
// dynalite:
//
//   - dynalite: starts dynalite in memory on a free loopback port (see
//     package localtest/dynalite; install it with `make deps`);
//   - moto: starts moto_server in memory on a free loopback port (see
//     package localtest/moto; `pip install 'moto[server]'`);
//   - a URL (http or https): starts nothing and runs CMD against that
//     endpoint, so the same tests can run against DynamoDB Local or a real
//     table.
//
// withdynalite sets AWS_ENDPOINT_URL_DYNAMODB to the endpoint and
// DEDUPE_DYNAMODB_SERVER to "dynalite", "moto" or "endpoint", so that tests
// can expect each server's documented differences by name (see
// localtest/dynamoserver.ServerKind). It stops a server it started when CMD
// exits or when withdynalite receives SIGINT or SIGTERM (which it passes on
// to CMD).
//
// When the endpoint is a started server or another loopback address,
// withdynalite also sets dummy credentials (AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY) and AWS_REGION=us-east-1, each only if it is not
// already set. It leaves them alone for any other endpoint, where real
// credentials are needed.
//
// withdynalite exits with CMD's exit code (128+N when CMD died of signal N),
// 127 when CMD cannot be started, 2 on a usage error, and 1 when the server
// cannot be started.
//
// The -v flag copies the started server's own output to standard error.
package main
