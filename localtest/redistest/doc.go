// Package redistest provides the test rig's Redis server: it starts a
// throwaway redis-server (or valkey-server) on a loopback port, without
// persistence, and tells tests which server to use.
//
// Two entry points, as in package localtest/dynalite:
//
//   - [URL] is for ordinary tests. It returns REDIS_URL, which `make test`
//     sets (through localtest/cmd/withservers) and which a user may point at
//     a server of their own. Without it the test is skipped, or fails when
//     the CI environment variable is set, so CI never passes by skipping.
//   - [Start] starts a server whose life the caller controls, and
//     [StartCluster] a Redis Cluster of such servers.
//
// redis-server comes from the system: on Debian or Ubuntu,
// `apt-get install -y redis-server` (which `make deps` runs when it is
// root on Debian and the server is missing). [Start] reports
// [ErrNotInstalled], naming that command, otherwise.
//
// This package imports "testing" for [URL]; like net/http/httptest, it is a
// helper meant to be imported by tests and the test rig only.
package redistest
