package pgtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/lambda-dedupe/dedupe/localtest/internal/proc"
)

// Environment variables read by [URL].
const (
	// EnvURL holds the connection URL of the PostgreSQL server tests use,
	// in the form pgx.ParseConfig reads (postgres://USER@HOST:PORT/DB).
	EnvURL = "DATABASE_URL"
	// EnvCI marks a CI run: [URL] fails instead of skipping.
	EnvCI = "CI"
)

// InstallHint is the one command that installs the server on Debian and
// Ubuntu, quoted in errors and skip messages.
const InstallHint = "apt-get install -y postgresql"

// Defaults for zero fields of [Options].
const (
	DefaultStartTimeout   = 60 * time.Second
	DefaultMaxConnections = 300
	DefaultUser           = "nobody"
)

// stopGrace is how long Stop waits after the fast-shutdown signal before
// SIGKILL.
const stopGrace = 10 * time.Second

// Errors returned by [Start]. The returned errors wrap them with details.
var (
	// ErrNotInstalled means initdb and postgres were not found.
	ErrNotInstalled = errors.New("pgtest: PostgreSQL not installed")

	// ErrNotReady means the cluster could not be created, or the server
	// did not accept a connection before the start timeout.
	ErrNotReady = errors.New("pgtest: PostgreSQL not ready")
)

// Options configures [Start]. The zero value finds the server binaries and
// starts a cluster on a free loopback port.
type Options struct {
	// BinDir holds initdb and postgres. Empty means the directory of initdb
	// on PATH, else the newest /usr/lib/postgresql/*/bin.
	BinDir string
	// Port is the TCP port on 127.0.0.1. Zero picks a free one.
	Port int
	// MaxConnections is the server's max_connections. Zero means
	// DefaultMaxConnections, room for the contract suite's 200 concurrent
	// claims on separate connections.
	MaxConnections int
	// User is the unprivileged user the server runs as when the caller is
	// root. Empty means DefaultUser. It is ignored for other callers, who
	// run the server as themselves.
	User string
	// StartTimeout bounds initdb and the wait for the first connection.
	// Zero means DefaultStartTimeout.
	StartTimeout time.Duration
	// Output receives the output of initdb and postgres. Nil discards it;
	// the last few kilobytes are quoted in start errors either way.
	Output io.Writer
}

// Server is a running throwaway cluster started by [Start].
type Server struct {
	port int
	dir  string
	p    *proc.Process
}

// Start creates a cluster in a new temporary directory (superuser
// postgres, trust authentication, UTF8, locale C), starts postgres on
// 127.0.0.1 with its socket in that directory, and returns once it accepts
// a connection. ctx bounds only the start.
func Start(ctx context.Context, opts Options) (*Server, error) {
	bin, err := binDir(opts.BinDir)
	if err != nil {
		return nil, err
	}
	timeout := opts.StartTimeout
	if timeout <= 0 {
		timeout = DefaultStartTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	maxConns := opts.MaxConnections
	if maxConns <= 0 {
		maxConns = DefaultMaxConnections
	}

	var as *proc.User
	if os.Geteuid() == 0 {
		name := opts.User
		if name == "" {
			name = DefaultUser
		}
		if as, err = lookupUser(name); err != nil {
			return nil, fmt.Errorf("%w: postgres cannot run as root, and %v", ErrNotReady, err)
		}
	}
	dir, err := os.MkdirTemp("", "dedupe-pg-")
	if err != nil {
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	fail := func(err error) (*Server, error) {
		os.RemoveAll(dir)
		return nil, err
	}
	if as != nil {
		if err := os.Chown(dir, int(as.Uid), int(as.Gid)); err != nil {
			return fail(fmt.Errorf("start postgres: hand %s to uid %d: %w", dir, as.Uid, err))
		}
	}
	data := filepath.Join(dir, "data")
	initdb := exec.CommandContext(ctx, filepath.Join(bin, "initdb"),
		"-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync")
	initdb.Dir = dir
	initdb.Env = []string{"PATH=" + os.Getenv("PATH"), "LC_ALL=C"}
	p, err := proc.Start(initdb, opts.Output, as)
	if err != nil {
		return fail(fmt.Errorf("start postgres: initdb: %w", err))
	}
	<-p.Done()
	if err := p.Err(); err != nil {
		return fail(fmt.Errorf("%w: initdb: %v%s", ErrNotReady, err, p.Log().Quote("initdb")))
	}

	const attempts = 3
	for i := 1; ; i++ {
		port := opts.Port
		if port == 0 {
			if port, err = proc.FreePort(); err != nil {
				return fail(fmt.Errorf("start postgres: %w", err))
			}
		}
		s, err := start(ctx, bin, dir, port, maxConns, as, opts.Output)
		if err == nil {
			return s, nil
		}
		if opts.Port != 0 || i == attempts || !strings.Contains(err.Error(), "already in use") {
			return fail(err)
		}
	}
}

// start runs postgres on port and waits until it accepts a connection.
func start(ctx context.Context, bin, dir string, port, maxConns int, as *proc.User, out io.Writer) (*Server, error) {
	cmd := exec.Command(filepath.Join(bin, "postgres"),
		"-D", filepath.Join(dir, "data"),
		"-p", strconv.Itoa(port),
		"-k", dir,
		"-c", "listen_addresses=127.0.0.1",
		"-c", "max_connections="+strconv.Itoa(maxConns),
		"-c", "fsync=off",
		"-c", "synchronous_commit=off",
		"-c", "full_page_writes=off",
		"-c", "shared_buffers=64MB",
	)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "LC_ALL=C"}
	p, err := proc.Start(cmd, out, as)
	if err != nil {
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	s := &Server{port: port, dir: dir, p: p}
	if err := waitReady(ctx, s.URL(), p.Done()); err != nil {
		p.Stop(syscall.SIGINT, stopGrace)
		return nil, fmt.Errorf("start postgres on port %d: %w: %v%s", port, ErrNotReady, err, p.Log().Quote("postgres"))
	}
	return s, nil
}

// waitReady connects to url until it succeeds, the process exits or ctx
// ends.
func waitReady(ctx context.Context, url string, done <-chan struct{}) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		c, err := pgconn.Connect(cctx, url)
		cancel()
		if err == nil {
			return c.Close(ctx)
		}
		last = err
		select {
		case <-done:
			return fmt.Errorf("exited while starting: %v", last)
		case <-ctx.Done():
			return fmt.Errorf("%v (last: %v)", ctx.Err(), last)
		case <-tick.C:
		}
	}
}

// binDir returns the directory holding initdb and postgres.
func binDir(dir string) (string, error) {
	if dir == "" {
		if p, err := exec.LookPath("initdb"); err == nil {
			dir = filepath.Dir(p)
		} else {
			dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
			slices.SortFunc(dirs, func(a, b string) int { return version(b) - version(a) })
			if len(dirs) > 0 {
				dir = dirs[0]
			}
		}
	}
	if dir == "" {
		return "", fmt.Errorf("%w: no initdb on PATH or in /usr/lib/postgresql/*/bin; install it with `%s` (Debian, Ubuntu), or set %s to a server of your own", ErrNotInstalled, InstallHint, EnvURL)
	}
	for _, name := range []string{"initdb", "postgres"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			return "", fmt.Errorf("%w: %v", ErrNotInstalled, err)
		}
	}
	return dir, nil
}

// version returns the major version in a path /usr/lib/postgresql/N/bin.
func version(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

// lookupUser returns the ids of the named user.
func lookupUser(name string) (*proc.User, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("look up user %s: %w", name, err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("user %s: %w", name, err)
	}
	if uid == 0 {
		return nil, fmt.Errorf("user %s is root", name)
	}
	return &proc.User{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// URL returns the server's connection URL,
// postgres://postgres@127.0.0.1:PORT/postgres?sslmode=disable.
func (s *Server) URL() string {
	return "postgres://postgres@127.0.0.1:" + strconv.Itoa(s.port) + "/postgres?sslmode=disable"
}

// Port returns the TCP port the server listens on.
func (s *Server) Port() int { return s.port }

// Stop shuts the server down (fast shutdown, SIGKILL after a grace
// period), waits for it to exit and removes the cluster. Stop on a stopped
// server does nothing.
func (s *Server) Stop() error {
	if s.p == nil {
		return nil
	}
	s.p.Stop(syscall.SIGINT, stopGrace)
	s.p = nil
	return os.RemoveAll(s.dir)
}

// URL returns the PostgreSQL URL for a test that needs a server: the value
// of DATABASE_URL. When it is empty, URL fails the test if CI is set and
// skips it otherwise; `make test` sets it by running the tests under
// localtest/cmd/withservers, which starts a throwaway cluster.
func URL(t testing.TB) string {
	t.Helper()
	if u := os.Getenv(EnvURL); u != "" {
		return u
	}
	msg := fmt.Sprintf("%s is not set: run make test, which starts a throwaway PostgreSQL cluster (install the server with `%s`), or point %s at a server of your own", EnvURL, InstallHint, EnvURL)
	if os.Getenv(EnvCI) != "" {
		t.Fatalf("PostgreSQL required in CI: %s", msg)
		return ""
	}
	t.Skip(msg)
	return ""
}
