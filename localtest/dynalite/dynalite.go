package dynalite

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lambda-dedupe/dedupe/localtest/internal/proc"
)

// DefaultStartTimeout is how long [Start] and [Server.Restart] wait for
// dynalite to answer when [Options.StartTimeout] is zero. It is generous:
// Node.js can take many seconds to load dynalite on a machine busy with a
// parallel test run, and a wait returns as soon as dynalite answers.
const DefaultStartTimeout = 2 * time.Minute

// stopGrace is how long Stop waits after SIGTERM before it sends SIGKILL.
const stopGrace = 5 * time.Second

// binRel is where `npm ci --prefix localtest` puts the dynalite executable,
// relative to the module root.
var binRel = filepath.Join("localtest", "node_modules", ".bin", "dynalite")

// serveRel is the script that runs the installed dynalite's command, so
// that a client dropping its connection mid-request does not end the
// server (see serve.js), relative to the module root.
var serveRel = filepath.Join("localtest", "dynalite", "serve.js")

// installHint tells the user how to install dynalite.
const installHint = "run `make deps` (or `npm ci --prefix localtest`) at the repository root"

// Options configures [Start]. The zero value starts the project's pinned
// dynalite on a free loopback port.
type Options struct {
	// Bin is the path of the dynalite executable, run as it is. Empty
	// means the dynalite that `npm ci --prefix localtest` installs under
	// the module root (the nearest directory at or above the working
	// directory that holds a go.mod file), run by node through
	// localtest/dynalite/serve.js, which keeps the server up when a
	// client drops its connection mid-request.
	Bin string

	// Port is the TCP port dynalite listens on, on 127.0.0.1. Zero picks a
	// free port.
	Port int

	// StartTimeout bounds how long Start and Restart wait for dynalite to
	// answer its first request. Zero means DefaultStartTimeout.
	StartTimeout time.Duration

	// Output receives dynalite's standard output and standard error. Nil
	// discards them; the last few kilobytes are kept either way and quoted
	// in errors about a failed start or an unexpected exit.
	Output io.Writer
}

// Server is a running dynalite process, started by [Start]. It keeps its
// tables in memory only: they are lost when it stops or restarts.
//
// A Server's methods are safe for concurrent use. While the process runs,
// one goroutine, started with it, waits for it to exit; Stop waits for that
// goroutine to end.
type Server struct {
	bin     string
	args    []string // before dynalite's flags: the script node runs
	port    int
	timeout time.Duration
	output  io.Writer

	mu   sync.Mutex
	proc *process // nil once stopped
}

// process is one run of the dynalite executable.
type process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd.Wait has returned
	err  error         // cmd.Wait's result; read only after done is closed
	log  *proc.Tail
}

// Start starts dynalite in memory on 127.0.0.1 and returns once it answers
// a ListTables request, or fails after the start timeout.
//
// The process runs in its own process group and outlives ctx, which bounds
// only the start; end it with [Server.Stop]. Tests usually write:
//
//	srv, err := dynalite.Start(ctx, dynalite.Options{})
//	if err != nil {
//		t.Fatal(err)
//	}
//	t.Cleanup(func() { srv.Stop() })
//
// Start returns an error wrapping [ErrNotInstalled] when the executable or
// node is missing, and one wrapping [ErrNotReady] when dynalite does not
// answer in time or exits while starting.
func Start(ctx context.Context, opts Options) (*Server, error) {
	bin, args := opts.Bin, []string(nil)
	if bin == "" {
		root, err := moduleRoot()
		if err != nil {
			return nil, fmt.Errorf("find dynalite: %w", err)
		}
		node, err := exec.LookPath("node")
		if err != nil {
			return nil, fmt.Errorf("%w: node is not on PATH; install Node.js 20 or later, then %s", ErrNotInstalled, installHint)
		}
		for _, rel := range []string{binRel, serveRel} {
			if _, err := os.Stat(filepath.Join(root, rel)); err != nil {
				return nil, fmt.Errorf("%w: %s: %v; %s", ErrNotInstalled, filepath.Join(root, rel), err, installHint)
			}
		}
		bin, args = node, []string{filepath.Join(root, serveRel)}
	}
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("%w: %s: %v; %s", ErrNotInstalled, bin, err, installHint)
	}
	s := &Server{bin: bin, args: args, port: opts.Port, timeout: opts.StartTimeout, output: opts.Output}
	if s.timeout <= 0 {
		s.timeout = DefaultStartTimeout
	}

	// A port picked as free can be taken by another process before
	// dynalite binds it; pick again a few times when that happens.
	const attempts = 3
	for i := 1; ; i++ {
		if opts.Port == 0 {
			port, err := proc.FreePort()
			if err != nil {
				return nil, fmt.Errorf("start dynalite: %w", err)
			}
			s.port = port
		}
		p, err := s.start(ctx)
		if err == nil {
			s.proc = p
			return s, nil
		}
		if opts.Port != 0 || i == attempts || !strings.Contains(p.log.String(), "EADDRINUSE") {
			return nil, err
		}
	}
}

// Endpoint returns the server's URL, http://127.0.0.1:PORT. It stays the
// same across [Server.Restart].
func (s *Server) Endpoint() string {
	return "http://127.0.0.1:" + strconv.Itoa(s.port)
}

// Port returns the TCP port the server listens on.
func (s *Server) Port() int {
	return s.port
}

// Stopped reports whether the server is not running: it was stopped, or
// its process exited on its own.
func (s *Server) Stopped() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return true
	}
	select {
	case <-s.proc.done:
		return true
	default:
		return false
	}
}

// Stop ends the server's process group (SIGTERM, then SIGKILL after a grace
// period) and waits for the process to exit, so that its port is free when
// Stop returns. The tables are lost.
//
// Stop on a stopped server does nothing and returns nil. When the process
// had already exited on its own, Stop returns an error wrapping [ErrExited]
// that quotes its last output.
func (s *Server) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stopLocked()
}

// Restart stops the server if it is running, then starts dynalite again on
// the same port and waits until it answers, as [Start] does. The tables are
// lost: the new process starts empty, and callers must create them again.
//
// To simulate an outage, call [Server.Stop], make the requests that should
// fail, then call Restart. Restart fails if another process took the port
// in the meantime.
func (s *Server) Restart(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.stopLocked(); err != nil && !errors.Is(err, ErrExited) {
		return fmt.Errorf("restart dynalite: %w", err)
	}
	p, err := s.start(ctx)
	if err != nil {
		return fmt.Errorf("restart dynalite: %w", err)
	}
	s.proc = p
	return nil
}

// stopLocked implements Stop; s.mu must be held.
func (s *Server) stopLocked() error {
	p := s.proc
	if p == nil {
		return nil
	}
	s.proc = nil
	select {
	case <-p.done:
		return fmt.Errorf("%w: %v%s", ErrExited, p.err, p.log.Quote("dynalite"))
	default:
	}
	p.kill()
	return nil
}

// start runs the executable on s.port and waits until it answers. On
// failure it has killed the process again; the returned process is then
// only useful for its log.
func (s *Server) start(ctx context.Context) (*process, error) {
	p := &process{done: make(chan struct{}), log: &proc.Tail{}}
	var out io.Writer = p.log
	if s.output != nil {
		out = io.MultiWriter(p.log, s.output)
	}
	p.cmd = exec.Command(s.bin, append(slices.Clip(s.args),
		"--host", "127.0.0.1",
		"--port", strconv.Itoa(s.port),
		"--createTableMs", "0",
		"--deleteTableMs", "0",
		"--updateTableMs", "0",
	)...)
	p.cmd.Stdout = out
	p.cmd.Stderr = out
	setProcessGroup(p.cmd)
	if err := p.cmd.Start(); err != nil {
		return p, fmt.Errorf("start dynalite: %w", err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()

	if err := proc.WaitDynamoDB(ctx, s.Endpoint(), s.timeout, p.done); err != nil {
		err = fmt.Errorf("%w: %w", ErrNotReady, err)
		p.kill()
		return p, fmt.Errorf("start dynalite on port %d: %w%s", s.port, err, p.log.Quote("dynalite"))
	}
	return p, nil
}

// kill ends the process group and waits for the process to exit.
func (p *process) kill() {
	_ = signalGroup(p.cmd.Process, false)
	t := time.NewTimer(stopGrace)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
		_ = signalGroup(p.cmd.Process, true)
		<-p.done
	}
}

// moduleRoot returns the nearest directory at or above the working
// directory that holds a go.mod file.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("%w: no go.mod at or above the working directory; set Options.Bin", ErrNotInstalled)
		}
		dir = parent
	}
}
