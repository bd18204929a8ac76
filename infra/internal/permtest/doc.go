// Package permtest holds TestPermissions: it records the AWS calls every
// part of dedupe really makes (the guard on each store mode, the
// global-table check, LargeResults, the reaper, each subcommand of the
// dedupe command), on the test's DynamoDB server and on moto's S3, and
// holds the permissions table (infra.PermissionsFile) to them. The docs,
// the shipped policies (infra's tests) and the cfn-lint rules read that
// table, so a call the code starts making fails here until the table, and
// with it every policy, says so.
//
// After changing what the code calls, rewrite the table with
//
//	build/bin/withdynalite -- go test ./infra/internal/permtest -run TestPermissions -update
//
// and review the diff: every shipped policy is then checked against it.
package permtest
