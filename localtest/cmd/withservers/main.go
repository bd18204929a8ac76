package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/lambda-dedupe/dedupe/localtest/pgtest"
	"github.com/lambda-dedupe/dedupe/localtest/redistest"
)

func main() {
	os.Exit(run(os.Args[1:], os.Environ(), os.Stdin, os.Stdout, os.Stderr))
}

// server is one server withservers may start.
type server struct {
	name  string // for messages
	env   string // the variable that names it
	needs string // the variable of the server it stands in front of, if any
	// start starts it; env is the environment so far (the URLs of the
	// servers it needs included).
	start func(ctx context.Context, env []string, out io.Writer) (url string, stop func() error, err error)
}

// started is the outcome of starting one server.
type started struct {
	url  string
	stop func() error
	err  error
}

// servers are the servers withservers provides, in report order.
var servers = []server{
	{"postgres", pgtest.EnvURL, "", func(ctx context.Context, _ []string, out io.Writer) (string, func() error, error) {
		s, err := pgtest.Start(ctx, pgtest.Options{Output: out})
		if err != nil {
			return "", nil, err
		}
		return s.URL(), s.Stop, nil
	}},
	{"redis-server", redistest.EnvURL, "", func(ctx context.Context, _ []string, out io.Writer) (string, func() error, error) {
		s, err := redistest.Start(ctx, redistest.Options{Output: out})
		if err != nil {
			return "", nil, err
		}
		return s.URL(), s.Stop, nil
	}},
	{"redis cluster", redistest.EnvClusterURL, "", func(ctx context.Context, _ []string, out io.Writer) (string, func() error, error) {
		c, err := redistest.StartCluster(ctx, redistest.Options{Output: out}, 3)
		if err != nil {
			return "", nil, err
		}
		return c.URL(), c.Stop, nil
	}},
	{"pgbouncer", pgtest.EnvPgBouncerURL, pgtest.EnvURL, func(ctx context.Context, env []string, out io.Writer) (string, func() error, error) {
		upstream := getenv(env, pgtest.EnvURL)
		if upstream == "" {
			return "", nil, fmt.Errorf("no PostgreSQL to stand in front of: %s is unset", pgtest.EnvURL)
		}
		b, err := pgtest.StartPgBouncer(ctx, upstream, pgtest.Options{Output: out})
		if err != nil {
			return "", nil, err
		}
		return b.URL(), b.Stop, nil
	}},
}

// run implements the command and returns its exit code.
func run(args, env []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("withservers", flag.ContinueOnError)
	fs.SetOutput(stderr)
	verbose := fs.Bool("v", false, "copy the servers' output to standard error")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: withservers [-v] -- CMD [ARGS...]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return 2
	}

	// Take SIGINT and SIGTERM from now on: the servers must be stopped
	// whatever ends the run. They are passed on to CMD once it runs.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)

	var out io.Writer
	if *verbose {
		out = stderr
	}
	// Servers start in waves, each wave's at once: first those that need
	// no other, then those whose variable they need is now set.
	var pending []server
	for _, srv := range servers {
		if getenv(env, srv.env) != "" {
			fmt.Fprintf(stderr, "withservers: using %s from the environment\n", srv.env)
			continue
		}
		pending = append(pending, srv)
	}
	for len(pending) > 0 {
		var wave, later []server
		for _, srv := range pending {
			if srv.needs != "" && getenv(env, srv.needs) == "" && slices.ContainsFunc(pending, func(p server) bool { return p.env == srv.needs }) {
				later = append(later, srv)
			} else {
				wave = append(wave, srv)
			}
		}
		results := make([]started, len(wave))
		var wg sync.WaitGroup
		for i, srv := range wave {
			wg.Go(func() {
				results[i].url, results[i].stop, results[i].err = startServer(srv, env, out)
			})
		}
		wg.Wait()
		for i, srv := range wave {
			r := results[i]
			if r.err != nil {
				fmt.Fprintf(stderr, "withservers: %s not started, %s left unset: %v\n", srv.name, srv.env, r.err)
				continue
			}
			defer func() {
				if err := r.stop(); err != nil {
					fmt.Fprintf(stderr, "withservers: stop %s: %v\n", srv.name, err)
				}
			}()
			env = setenv(env, srv.env, r.url)
			fmt.Fprintf(stderr, "withservers: %s listening, %s=%s\n", srv.name, srv.env, r.url)
		}
		pending = later
	}

	cmd := exec.Command(fs.Arg(0), fs.Args()[1:]...)
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "withservers: %v\n", err)
		return 127
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for {
		select {
		case sig := <-sigs:
			_ = cmd.Process.Signal(sig)
		case err := <-done:
			return exitCode(err, stderr)
		}
	}
}

// startServer starts srv, giving up early on SIGINT or SIGTERM.
func startServer(srv server, env []string, out io.Writer) (string, func() error, error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return srv.start(ctx, env, out)
}

// exitCode turns cmd.Wait's error into an exit code.
func exitCode(err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		fmt.Fprintf(stderr, "withservers: %v\n", err)
		return 1
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ee.ExitCode()
}

// getenv returns the last value of name in env, as os/exec does.
func getenv(env []string, name string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], name+"="); ok {
			return v
		}
	}
	return ""
}

// setenv returns env with name set to value, dropping earlier values.
func setenv(env []string, name, value string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if !strings.HasPrefix(kv, name+"=") {
			out = append(out, kv)
		}
	}
	return append(out, name+"="+value)
}
