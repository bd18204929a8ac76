package redistest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lambda-dedupe/dedupe/localtest/internal/proc"
)

// Environment variables read by [URL].
const (
	// EnvURL holds the URL of the Redis server tests use,
	// redis://HOST:PORT/DB (the form redis.ParseURL reads).
	EnvURL = "REDIS_URL"
	// EnvCI marks a CI run: [URL] fails instead of skipping.
	EnvCI = "CI"
)

// InstallHint is the one command that installs the server on Debian and
// Ubuntu, quoted in errors and skip messages.
const InstallHint = "apt-get install -y redis-server"

// DefaultStartTimeout is how long [Start] waits for the server to answer
// when [Options.StartTimeout] is zero.
const DefaultStartTimeout = 20 * time.Second

// stopGrace is how long Stop waits after SIGTERM before SIGKILL.
const stopGrace = 5 * time.Second

// Errors returned by [Start]. The returned errors wrap them with details.
var (
	// ErrNotInstalled means neither redis-server nor valkey-server was
	// found on PATH (and Options.Bin was empty or missing).
	ErrNotInstalled = errors.New("redistest: redis-server not installed")

	// ErrNotReady means the server did not answer PING before the start
	// timeout, or exited while starting.
	ErrNotReady = errors.New("redistest: redis-server not ready")
)

// Options configures [Start]. The zero value starts redis-server from PATH
// on a free loopback port.
type Options struct {
	// Bin is the server executable. Empty means redis-server, or else
	// valkey-server, from PATH.
	Bin string
	// Port is the TCP port on 127.0.0.1. Zero picks a free one.
	Port int
	// StartTimeout bounds the wait for the first PONG. Zero means
	// DefaultStartTimeout.
	StartTimeout time.Duration
	// Output receives the server's output. Nil discards it; the last few
	// kilobytes are quoted in start errors either way.
	Output io.Writer
}

// Server is a running redis-server started by [Start]: data in memory
// only, no RDB snapshots, no append-only file. Stop it with [Server.Stop].
type Server struct {
	port int
	dir  string
	p    *proc.Process
}

// Start starts a redis-server on 127.0.0.1 with persistence off
// (--save ” --appendonly no) and returns once it answers PING. ctx bounds
// only the start; the server runs until [Server.Stop].
func Start(ctx context.Context, opts Options) (*Server, error) {
	return startWith(ctx, opts)
}

// startWith implements Start, passing extra to the server after the
// standard arguments.
func startWith(ctx context.Context, opts Options, extra ...string) (*Server, error) {
	bin := opts.Bin
	if bin == "" {
		for _, name := range []string{"redis-server", "valkey-server"} {
			if p, err := exec.LookPath(name); err == nil {
				bin = p
				break
			}
		}
		if bin == "" {
			return nil, fmt.Errorf("%w: not on PATH; install it with `%s` (Debian, Ubuntu), or set %s to a server of your own", ErrNotInstalled, InstallHint, EnvURL)
		}
	} else if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotInstalled, err)
	}
	timeout := opts.StartTimeout
	if timeout <= 0 {
		timeout = DefaultStartTimeout
	}
	dir, err := os.MkdirTemp("", "dedupe-redis-")
	if err != nil {
		return nil, fmt.Errorf("start redis-server: %w", err)
	}
	const attempts = 3
	for i := 1; ; i++ {
		port := opts.Port
		if port == 0 {
			if port, err = proc.FreePort(); err != nil {
				os.RemoveAll(dir)
				return nil, fmt.Errorf("start redis-server: %w", err)
			}
		}
		s, err := start(ctx, bin, dir, port, timeout, opts.Output, extra)
		if err == nil {
			return s, nil
		}
		if opts.Port != 0 || i == attempts || !strings.Contains(err.Error(), "in use") {
			os.RemoveAll(dir)
			return nil, err
		}
	}
}

// start runs one server on port and waits for it.
func start(ctx context.Context, bin, dir string, port int, timeout time.Duration, out io.Writer, extra []string) (*Server, error) {
	args := []string{
		"--port", strconv.Itoa(port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--dir", dir,
		"--daemonize", "no",
		"--logfile", "",
		"--maxclients", "1000",
	}
	cmd := exec.Command(bin, append(args, extra...)...)
	cmd.Dir = dir
	p, err := proc.Start(cmd, out, nil)
	if err != nil {
		return nil, fmt.Errorf("start redis-server: %w", err)
	}
	s := &Server{port: port, dir: dir, p: p}
	if err := waitReady(ctx, s.Addr(), timeout, p.Done()); err != nil {
		p.Stop(syscall.SIGTERM, stopGrace)
		return nil, fmt.Errorf("start redis-server on port %d: %w: %v%s", port, ErrNotReady, err, p.Log().Quote("redis-server"))
	}
	return s, nil
}

// waitReady sends PING to addr until it answers PONG, the process exits,
// ctx ends or timeout passes.
func waitReady(ctx context.Context, addr string, timeout time.Duration, done <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		if last = ping(ctx, addr); last == nil {
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("exited while starting: %v", last)
		case <-ctx.Done():
			return fmt.Errorf("%v (last: %v)", ctx.Err(), last)
		case <-tick.C:
		}
	}
}

// ping sends one PING over a new connection.
func ping(ctx context.Context, addr string) error {
	var d net.Dialer
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	if _, err := io.WriteString(c, "PING\r\n"); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if strings.TrimSpace(line) != "+PONG" {
		return fmt.Errorf("PING answered %q", strings.TrimSpace(line))
	}
	return nil
}

// Addr returns the server's address, 127.0.0.1:PORT.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// URL returns the server's URL, redis://127.0.0.1:PORT/0.
func (s *Server) URL() string { return "redis://" + s.Addr() + "/0" }

// Stop ends the server (SIGTERM, SIGKILL after a grace period), waits for
// it to exit and removes its directory. Stop on a stopped server does
// nothing.
func (s *Server) Stop() error {
	if s.p == nil {
		return nil
	}
	s.p.Stop(syscall.SIGTERM, stopGrace)
	s.p = nil
	return os.RemoveAll(s.dir)
}

// URL returns the Redis URL for a test that needs a server: the value of
// REDIS_URL. When it is empty, URL fails the test if CI is set and skips
// it otherwise; `make test` sets it by running the tests under
// localtest/cmd/withservers, which starts redis-server (install it with
// `apt-get install -y redis-server`).
func URL(t testing.TB) string {
	t.Helper()
	if u := os.Getenv(EnvURL); u != "" {
		return u
	}
	msg := fmt.Sprintf("%s is not set: run make test, which starts redis-server (install it with `%s`), or point %s at a Redis or Valkey server", EnvURL, InstallHint, EnvURL)
	if os.Getenv(EnvCI) != "" {
		t.Fatalf("Redis required in CI: %s", msg)
		return ""
	}
	t.Skip(msg)
	return ""
}
