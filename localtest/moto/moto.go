package moto

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lambda-dedupe/dedupe/localtest/internal/proc"
)

// DefaultBin is the executable [Start] looks up on PATH when
// [Options.Bin] is empty.
const DefaultBin = "moto_server"

// InstallHint tells the user how to install moto_server.
const InstallHint = "install moto with its server: pip install 'moto[server]' (moto 5 or later)"

// DefaultStartTimeout is how long [Start] waits for moto_server to answer
// when [Options.StartTimeout] is zero. Python takes a few seconds to import
// moto's service models on a busy machine, and a wait returns as soon as
// moto_server answers.
const DefaultStartTimeout = 2 * time.Minute

// stopGrace is how long Stop waits after SIGTERM before it sends SIGKILL.
const stopGrace = 5 * time.Second

// Options configures [Start]. The zero value starts moto_server from PATH
// on a free loopback port.
type Options struct {
	// Bin is the moto_server executable. Empty means DefaultBin, looked up
	// on PATH.
	Bin string

	// Port is the TCP port moto_server listens on, on 127.0.0.1. Zero picks
	// a free port.
	Port int

	// Concurrent passes requests to moto_server as they come, several at
	// a time. False (the default) puts a loopback proxy in front of it that
	// passes one request at a time, because moto's conditional writes are
	// not atomic under concurrent requests (see the package
	// documentation); the endpoint is then the proxy's.
	Concurrent bool

	// StartTimeout bounds how long Start waits for moto_server to answer
	// its first request. Zero means DefaultStartTimeout.
	StartTimeout time.Duration

	// Output receives moto_server's standard output and standard error
	// (one line per request). Nil discards them; the last few kilobytes are
	// kept either way and quoted in errors about a failed start or an
	// unexpected exit.
	Output io.Writer
}

// Server is a running moto_server process, started by [Start]. It keeps
// everything in memory: all state is lost when it stops.
//
// A Server's methods are safe for concurrent use. While the process runs,
// one goroutine, started with it, waits for it to exit; Stop waits for that
// goroutine to end.
type Server struct {
	port  int         // the endpoint's port: the serializer's, or moto's
	proxy *serializer // nil with Options.Concurrent

	mu   sync.Mutex
	cmd  *exec.Cmd // nil once stopped
	done chan struct{}
	err  error // cmd.Wait's result; read only after done is closed
	log  *proc.Tail
}

// Start starts moto_server in memory on 127.0.0.1 and returns once it
// answers a DynamoDB ListTables request, or fails after the start timeout.
//
// The process runs in its own process group and outlives ctx, which bounds
// only the start; end it with [Server.Stop]. Start returns an error
// wrapping [ErrNotInstalled] when the executable is missing, and one
// wrapping [ErrNotReady] when moto_server does not answer in time or exits
// while starting.
func Start(ctx context.Context, opts Options) (*Server, error) {
	bin := opts.Bin
	if bin == "" {
		bin = DefaultBin
	}
	path, err := exec.LookPath(bin)
	if err != nil {
		return nil, fmt.Errorf("%w: %v; %s", ErrNotInstalled, err, InstallHint)
	}
	timeout := opts.StartTimeout
	if timeout <= 0 {
		timeout = DefaultStartTimeout
	}
	// A port picked as free can be taken by another process before
	// moto_server binds it; pick again a few times when that happens.
	const attempts = 3
	// moto_server's own port: Port, unless the serializer takes it.
	motoPort := opts.Port
	if !opts.Concurrent {
		motoPort = 0
	}
	for i := 1; ; i++ {
		port := motoPort
		if port == 0 {
			if port, err = proc.FreePort(); err != nil {
				return nil, fmt.Errorf("start moto_server: %w", err)
			}
		}
		s, err := start(ctx, path, port, timeout, opts.Output)
		if err == nil {
			if opts.Concurrent {
				return s, nil
			}
			p, err := startSerializer(opts.Port, s.Endpoint())
			if err != nil {
				_ = s.Stop()
				return nil, fmt.Errorf("start moto_server: %w", err)
			}
			s.proxy, s.port = p, p.port()
			return s, nil
		}
		if motoPort != 0 || i == attempts || s == nil || !strings.Contains(s.log.String(), "in use") {
			return nil, err
		}
	}
}

// start runs path on port and waits until it answers. On failure it has
// killed the process again; the returned server, if any, is then only
// useful for its log.
func start(ctx context.Context, path string, port int, timeout time.Duration, output io.Writer) (*Server, error) {
	s := &Server{port: port, done: make(chan struct{}), log: &proc.Tail{}}
	var out io.Writer = s.log
	if output != nil {
		out = io.MultiWriter(s.log, output)
	}
	cmd := exec.Command(path, "-H", "127.0.0.1", "-p", strconv.Itoa(port))
	cmd.Stdout, cmd.Stderr = out, out
	setProcessGroup(cmd)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start moto_server: %w", err)
	}
	s.cmd = cmd
	go func() {
		s.err = cmd.Wait()
		close(s.done)
	}()
	if err := proc.WaitDynamoDB(ctx, s.Endpoint(), timeout, s.done); err != nil {
		err = fmt.Errorf("%w: %w", ErrNotReady, err)
		s.kill()
		return s, fmt.Errorf("start moto_server on port %d: %w%s", port, err, s.log.Quote("moto_server"))
	}
	return s, nil
}

// Endpoint returns the server's URL, http://127.0.0.1:PORT: the endpoint
// of every AWS service it models (the serializing proxy's, unless
// Options.Concurrent is set).
func (s *Server) Endpoint() string {
	return "http://127.0.0.1:" + strconv.Itoa(s.port)
}

// Port returns the TCP port the server listens on.
func (s *Server) Port() int {
	return s.port
}

// Stop ends the server's process group (SIGTERM, then SIGKILL after a grace
// period) and waits for the process to exit, so that its port is free when
// Stop returns. All state is lost.
//
// Stop on a stopped server does nothing and returns nil. When the process
// had already exited on its own, Stop returns an error wrapping [ErrExited]
// that quotes its last output.
func (s *Server) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proxy != nil {
		s.proxy.close()
		s.proxy = nil
	}
	if s.cmd == nil {
		return nil
	}
	select {
	case <-s.done:
		s.cmd = nil
		return fmt.Errorf("%w: %v%s", ErrExited, s.err, s.log.Quote("moto_server"))
	default:
	}
	s.kill()
	s.cmd = nil
	return nil
}

// kill ends the process group and waits for the process to exit.
func (s *Server) kill() {
	_ = signalGroup(s.cmd.Process, false)
	t := time.NewTimer(stopGrace)
	defer t.Stop()
	select {
	case <-s.done:
	case <-t.C:
		_ = signalGroup(s.cmd.Process, true)
		<-s.done
	}
}
