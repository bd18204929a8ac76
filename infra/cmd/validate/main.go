package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/lambda-dedupe/dedupe/infra"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run implements the command and returns its exit code.
func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("o", filepath.Join("build", "template.transformed.json"), "where to write the transformed template")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	path := fs.Arg(0)
	if path == "" {
		var err error
		if path, err = infra.FindTemplate(); err != nil {
			fmt.Fprintf(stderr, "validate: %v\n", err)
			return 1
		}
	}
	if err := os.MkdirAll(filepath.Dir(*out), 0o755); err != nil {
		fmt.Fprintf(stderr, "validate: %v\n", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ran, err := infra.Validate(ctx, path, *out)
	var le *infra.LintError
	switch {
	case errors.Is(err, infra.ErrToolMissing):
		fmt.Fprintf(stderr, "validate: %v\n", err)
		return 3
	case errors.As(err, &le):
		for _, f := range le.Findings {
			fmt.Fprintln(stderr, f)
		}
		fmt.Fprintf(stderr, "validate: %d finding(s) in %s; dedupe's rules (E91xx, W91xx): docs/deploying.md#checking-your-template\n", len(le.Findings), path)
		return 1
	case err != nil:
		fmt.Fprintf(stderr, "validate: %v\n", err)
		return 1
	}
	for _, line := range ran {
		fmt.Fprintf(stdout, "ok  %s\n", line)
	}
	return 0
}
