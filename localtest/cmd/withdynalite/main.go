package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"

	"github.com/lambda-dedupe/dedupe/localtest/dynalite"
	"github.com/lambda-dedupe/dedupe/localtest/dynamoserver"
	"github.com/lambda-dedupe/dedupe/localtest/moto"
)

// Defaults set for a loopback endpoint when the variable is empty.
var localDefaults = []struct{ name, value string }{
	{"AWS_ACCESS_KEY_ID", "local"},
	{"AWS_SECRET_ACCESS_KEY", "local"},
	{"AWS_REGION", "us-east-1"},
}

// envBin names the dynalite executable when -dynalite is not given.
const envBin = "DYNALITE_BIN"

func main() {
	os.Exit(run(os.Args[1:], os.Environ(), os.Stdin, os.Stdout, os.Stderr))
}

// run implements the command and returns its exit code.
func run(args, env []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("withdynalite", flag.ContinueOnError)
	fs.SetOutput(stderr)
	verbose := fs.Bool("v", false, "copy the started server's output to standard error")
	server := fs.String("server", "", "`dynalite`, moto or an endpoint URL (default: $"+dynamoserver.EnvSelect+
		", else a preset $"+dynalite.EnvEndpoint+", else dynalite)")
	bin := fs.String("dynalite", getenv(env, envBin),
		"the dynalite executable (default $"+envBin+", else localtest/node_modules/.bin/dynalite under the module root)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: withdynalite [-v] [-server dynalite|moto|URL] [-dynalite PATH] -- CMD [ARGS...]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return 2
	}
	choice, err := choose(*server, getenv(env, dynamoserver.EnvSelect), getenv(env, dynalite.EnvEndpoint))
	if err != nil {
		fmt.Fprintf(stderr, "withdynalite: %v\n", err)
		return 2
	}

	// Take SIGINT and SIGTERM from now on: the server must be stopped
	// whatever ends the run. They are passed on to CMD once it runs.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)

	endpoint := choice.endpoint
	if endpoint == "" {
		var out io.Writer
		if *verbose {
			out = stderr
		}
		srv, err := startServer(choice.kind, *bin, out)
		if err != nil {
			fmt.Fprintf(stderr, "withdynalite: %v\n", err)
			return 1
		}
		defer func() {
			if err := srv.Stop(); err != nil {
				fmt.Fprintf(stderr, "withdynalite: stop %s: %v\n", choice.kind, err)
			}
		}()
		endpoint = srv.Endpoint()
		fmt.Fprintf(stderr, "withdynalite: %s listening at %s\n", choice.kind, endpoint)
	} else {
		fmt.Fprintf(stderr, "withdynalite: using %s=%s\n", dynalite.EnvEndpoint, endpoint)
	}
	env = setenv(env, dynalite.EnvEndpoint, endpoint)
	env = setenv(env, dynamoserver.EnvServer, string(choice.kind))
	if isLoopback(endpoint) {
		for _, d := range localDefaults {
			if getenv(env, d.name) == "" {
				env = setenv(env, d.name, d.value)
			}
		}
	}

	cmd := exec.Command(fs.Arg(0), fs.Args()[1:]...)
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "withdynalite: %v\n", err)
		return 127
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for {
		select {
		case sig := <-sigs:
			// A Ctrl-C in a terminal reaches CMD too, as it shares our
			// process group; passing it on again is harmless.
			_ = cmd.Process.Signal(sig)
		case err := <-done:
			return exitCode(err, stderr)
		}
	}
}

// choice is the server a run uses: one to start (endpoint empty), or an
// endpoint to use as it is.
type choice struct {
	kind     dynamoserver.Server
	endpoint string
}

// choose picks the server from the -server flag, else the DEDUPE_DYNAMODB
// value sel, else a preset AWS_ENDPOINT_URL_DYNAMODB, else dynalite.
func choose(flagValue, sel, preset string) (choice, error) {
	v := flagValue
	if v == "" {
		v = sel
	}
	switch {
	case v == string(dynamoserver.Dynalite), v == "" && preset == "":
		return choice{kind: dynamoserver.Dynalite}, nil
	case v == string(dynamoserver.Moto):
		return choice{kind: dynamoserver.Moto}, nil
	case v == "":
		return choice{kind: dynamoserver.Endpoint, endpoint: preset}, nil
	}
	if u, err := url.Parse(v); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return choice{}, fmt.Errorf("server %q: want dynalite, moto or an http(s) endpoint URL", v)
	}
	return choice{kind: dynamoserver.Endpoint, endpoint: v}, nil
}

// stopper is a started server.
type stopper interface {
	Endpoint() string
	Stop() error
}

// startServer starts dynalite or moto_server, copying its output to out
// when out is not nil, giving up early on SIGINT or SIGTERM.
// bin is the dynalite executable, "" for the default.
func startServer(kind dynamoserver.Server, bin string, out io.Writer) (stopper, error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if kind == dynamoserver.Moto {
		return moto.Start(ctx, moto.Options{Output: out})
	}
	return dynalite.Start(ctx, dynalite.Options{Bin: bin, Output: out})
}

// exitCode turns cmd.Wait's error into an exit code.
func exitCode(err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		fmt.Fprintf(stderr, "withdynalite: %v\n", err)
		return 1
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ee.ExitCode()
}

// isLoopback reports whether endpoint's host is localhost or a loopback IP.
func isLoopback(endpoint string) bool {
	u, err := url.Parse(endpoint)
	if err != nil {
		return false
	}
	host := u.Hostname()
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
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
