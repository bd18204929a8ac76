// Package ensuretest holds the tests of infra.EnsureTables that talk to a
// DynamoDB server. They live apart from package infra's own tests so that
// make test's second pass, which runs every DynamoDB package again on
// moto_server, runs these and not infra's template and cfn-lint tests,
// whose results do not depend on the server.
package ensuretest
