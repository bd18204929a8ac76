package pgtest

import (
	"fmt"
	"os"
	"testing"
)

// EnvPgBouncerURL holds the URL of a PgBouncer in transaction mode in
// front of the test server (DATABASE_URL), which
// localtest/cmd/withservers sets.
const EnvPgBouncerURL = "PGBOUNCER_URL"

// PgBouncerURL returns the URL of PgBouncer in transaction mode for a
// test that needs it: the value of PGBOUNCER_URL. When it is empty,
// PgBouncerURL fails the test if CI is set and skips it otherwise; `make
// test` sets it by running the tests under localtest/cmd/withservers,
// which starts PgBouncer in front of its PostgreSQL cluster.
func PgBouncerURL(t testing.TB) string {
	t.Helper()
	if u := os.Getenv(EnvPgBouncerURL); u != "" {
		return u
	}
	msg := fmt.Sprintf("%s is not set: run make test, which starts PgBouncer in transaction mode (install it with `%s`), or point %s at a PgBouncer of your own in front of %s", EnvPgBouncerURL, PgBouncerInstallHint, EnvPgBouncerURL, EnvURL)
	if os.Getenv(EnvCI) != "" {
		t.Fatalf("PgBouncer required in CI: %s", msg)
		return ""
	}
	t.Skip(msg)
	return ""
}
