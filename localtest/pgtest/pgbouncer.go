package pgtest

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/lambda-dedupe/dedupe/localtest/internal/proc"
)

// PgBouncerInstallHint is the one command that installs PgBouncer on
// Debian and Ubuntu.
const PgBouncerInstallHint = "apt-get install -y pgbouncer"

// PgBouncer is a running PgBouncer in transaction mode, started by
// [StartPgBouncer], for tests that a store keeps no session state.
type PgBouncer struct {
	port int
	db   string
	user string
	dir  string
	p    *proc.Process
}

// StartPgBouncer starts PgBouncer (pgbouncer on PATH, or /usr/sbin) on a
// free loopback port in front of the server at upstream (a postgres://
// URL such as [Server.URL] or DATABASE_URL), with pool_mode = transaction:
// consecutive transactions of one client connection may run on different
// server connections, so session state (named prepared statements,
// SET, advisory locks) does not survive between them. Authentication is
// trust, for the upstream URL's user. Like postgres, PgBouncer refuses to
// run as root; Start's rule applies (Options.User).
//
// Only opts.StartTimeout, opts.User and opts.Output are used.
func StartPgBouncer(ctx context.Context, upstream string, opts Options) (*PgBouncer, error) {
	bin, err := exec.LookPath("pgbouncer")
	if err != nil {
		if _, serr := os.Stat("/usr/sbin/pgbouncer"); serr != nil {
			return nil, fmt.Errorf("%w: pgbouncer not found; install it with `%s` (Debian, Ubuntu)", ErrNotInstalled, PgBouncerInstallHint)
		}
		bin = "/usr/sbin/pgbouncer"
	}
	u, err := url.Parse(upstream)
	if err != nil {
		return nil, fmt.Errorf("start pgbouncer: upstream: %w", err)
	}
	db := strings.TrimPrefix(u.Path, "/")
	if db == "" {
		db = "postgres"
	}
	userName := u.User.Username()
	if userName == "" {
		userName = "postgres"
	}
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = "5432"
	}
	timeout := opts.StartTimeout
	if timeout <= 0 {
		timeout = DefaultStartTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	var as *proc.User
	if os.Geteuid() == 0 {
		name := opts.User
		if name == "" {
			name = DefaultUser
		}
		if as, err = lookupUser(name); err != nil {
			return nil, fmt.Errorf("%w: pgbouncer cannot run as root, and %v", ErrNotReady, err)
		}
	}
	dir, err := os.MkdirTemp("", "dedupe-pgbouncer-")
	if err != nil {
		return nil, fmt.Errorf("start pgbouncer: %w", err)
	}
	fail := func(err error) (*PgBouncer, error) {
		os.RemoveAll(dir)
		return nil, err
	}
	if as != nil {
		if err := os.Chown(dir, int(as.Uid), int(as.Gid)); err != nil {
			return fail(fmt.Errorf("start pgbouncer: %w", err))
		}
	}
	listen, err := proc.FreePort()
	if err != nil {
		return fail(fmt.Errorf("start pgbouncer: %w", err))
	}
	ini := fmt.Sprintf(`[databases]
%s = host=%s port=%s dbname=%s user=%s

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s
pool_mode = transaction
max_client_conn = 1000
default_pool_size = 20
ignore_startup_parameters = extra_float_digits
admin_users = %s
`, db, host, port, db, userName, listen, filepath.Join(dir, "users.txt"), userName)
	files := map[string]string{
		"pgbouncer.ini": ini,
		"users.txt":     fmt.Sprintf("%q \"\"\n", userName),
	}
	for name, body := range files {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			return fail(fmt.Errorf("start pgbouncer: %w", err))
		}
	}
	cmd := exec.Command(bin, filepath.Join(dir, "pgbouncer.ini"))
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	p, err := proc.Start(cmd, opts.Output, as)
	if err != nil {
		return fail(fmt.Errorf("start pgbouncer: %w", err))
	}
	b := &PgBouncer{port: listen, db: db, user: userName, dir: dir, p: p}
	if err := waitReady(ctx, b.URL(), p.Done()); err != nil {
		p.Stop(syscall.SIGINT, stopGrace)
		return fail(fmt.Errorf("start pgbouncer on port %d: %w: %v%s", listen, ErrNotReady, err, p.Log().Quote("pgbouncer")))
	}
	return b, nil
}

// AdminURL returns the URL of PgBouncer's admin console (database
// pgbouncer; SHOW commands, simple protocol only).
func (b *PgBouncer) AdminURL() string {
	return "postgres://" + b.user + "@127.0.0.1:" + strconv.Itoa(b.port) + "/pgbouncer?sslmode=disable&default_query_exec_mode=simple_protocol"
}

// URL returns the URL clients connect to: the upstream's user and
// database, through PgBouncer.
func (b *PgBouncer) URL() string {
	return "postgres://" + b.user + "@127.0.0.1:" + strconv.Itoa(b.port) + "/" + b.db + "?sslmode=disable"
}

// Stop stops PgBouncer and removes its directory. Stop on a stopped
// PgBouncer does nothing.
func (b *PgBouncer) Stop() error {
	if b.p == nil {
		return nil
	}
	b.p.Stop(syscall.SIGINT, stopGrace)
	b.p = nil
	return os.RemoveAll(b.dir)
}
