package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/lambda-dedupe/dedupe/infra"
	"github.com/lambda-dedupe/dedupe/localtest/moto"
	"github.com/lambda-dedupe/dedupe/localtest/rehearsal"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run implements the command and returns its exit code.
func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("rehearse", flag.ContinueOnError)
	fs.SetOutput(stderr)
	endpoint := fs.String("endpoint", "", "a running, throwaway moto_server (default: start one)")
	keep := fs.String("keep", "", "keep the artifacts and the packaged template in this `directory`")
	verbose := fs.Bool("v", false, "copy moto_server's output to standard error")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := infra.Tools(ctx); err != nil {
		fmt.Fprintf(stderr, "rehearse: %v\n", err)
		return 3
	}
	if *endpoint == "" {
		opts := moto.Options{}
		if *verbose {
			opts.Output = stderr
		}
		srv, err := moto.Start(ctx, opts)
		if errors.Is(err, moto.ErrNotInstalled) {
			fmt.Fprintf(stderr, "rehearse: %v\n", err)
			return 3
		}
		if err != nil {
			fmt.Fprintf(stderr, "rehearse: %v\n", err)
			return 1
		}
		defer func() {
			if err := srv.Stop(); err != nil {
				fmt.Fprintf(stderr, "rehearse: stop moto_server: %v\n", err)
			}
		}()
		*endpoint = srv.Endpoint()
		fmt.Fprintf(stderr, "rehearse: moto_server listening at %s\n", *endpoint)
	}
	if *keep != "" {
		if err := os.MkdirAll(*keep, 0o755); err != nil {
			fmt.Fprintf(stderr, "rehearse: %v\n", err)
			return 1
		}
	}
	report, err := rehearsal.Run(ctx, rehearsal.Options{Endpoint: *endpoint, WorkDir: *keep, Log: stderr})
	if report != nil {
		report.Write(stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "rehearse: %v\n", err)
		return 1
	}
	return 0
}
