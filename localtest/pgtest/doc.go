// Package pgtest provides the test rig's PostgreSQL server: it creates a
// throwaway cluster (initdb) in a temporary directory and runs it on a
// loopback port, with its unix socket in that directory, and tells tests
// which server to use.
//
// Two entry points, as in package localtest/dynalite:
//
//   - [URL] is for ordinary tests. It returns DATABASE_URL, which
//     `make test` sets (through localtest/cmd/withservers) and which a user
//     may point at a server of their own. Without it the test is skipped,
//     or fails when the CI environment variable is set.
//   - [Start] starts a cluster whose life the caller controls, and
//     [StartPgBouncer] a PgBouncer in transaction mode in front of a
//     server.
//
// The server comes from the system: the first of Options.BinDir, the
// directory of initdb on PATH, and the newest /usr/lib/postgresql/*/bin
// (Debian's layout; PostgreSQL 15 on the project's machine image).
//
// postgres refuses to run as root. When the caller is root (CI is), Start
// runs initdb and postgres as the unprivileged user nobody (Options.User),
// and hands the temporary directory to that user.
//
// The cluster trades durability for speed (fsync, synchronous_commit and
// full_page_writes off): it is thrown away when it stops.
//
// This package imports "testing" for [URL]; like net/http/httptest, it is a
// helper meant to be imported by tests and the test rig only.
package pgtest
