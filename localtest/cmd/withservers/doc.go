// Command withservers runs a command with PostgreSQL, PgBouncer, Redis and
// a Redis Cluster in its environment, starting throwaway ones for it when
// needed.
//
// Usage:
//
//	go run ./localtest/cmd/withservers [-v] -- CMD [ARGS...]
//
// When DATABASE_URL is empty, withservers starts a throwaway PostgreSQL
// cluster on a free loopback port (see package localtest/pgtest) and sets
// DATABASE_URL to it. When REDIS_URL is empty, it starts redis-server
// without persistence on a free loopback port (see package
// localtest/redistest) and sets REDIS_URL. When REDIS_CLUSTER_URL is
// empty, it starts a Redis Cluster of three redis-server masters
// (redistest.StartCluster) and sets REDIS_CLUSTER_URL to
// redis://HOST:PORT?addr=HOST:PORT&addr=HOST:PORT, the form
// redis.ParseClusterURL reads. When PGBOUNCER_URL is empty, it starts
// PgBouncer in transaction mode in front of DATABASE_URL
// (pgtest.StartPgBouncer) and sets PGBOUNCER_URL. It runs CMD, and stops the
// servers it started when CMD exits or when withservers receives SIGINT
// or SIGTERM (which it passes on to CMD). A variable that is already set
// is left alone, so the same tests can run against servers of the user's
// own.
//
// A server that cannot be started (not installed, say) is reported on
// standard error and its variable left unset; CMD still runs. Tests that
// need it then skip, naming the command that installs it, or fail when
// CI is set.
//
// withservers exits with CMD's exit code (128+N when CMD died of signal
// N), and 127 when CMD cannot be started.
//
// The -v flag copies the servers' own output to standard error.
package main
