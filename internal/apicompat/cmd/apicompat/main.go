// Command apicompat checks the API of the module's packages under pkg/
// against the newest snapshot under api/ (make apicompat, part of make
// test), or writes the snapshot of a release (make api-snapshot
// VERSION=v0.1.0). Run it from the module's root.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"github.com/lambda-dedupe/dedupe/internal/apicompat"
)

func main() {
	write := flag.String("write", "", "write the API snapshot of `version` (v0.1.0) instead of checking")
	flag.Parse()
	if err := run(context.Background(), *write); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(ctx context.Context, write string) error {
	out, err := exec.CommandContext(ctx, "go", "list", "./pkg/...").Output()
	if err != nil {
		return fmt.Errorf("apicompat: go list ./pkg/...: %w", err)
	}
	o := apicompat.Options{Dir: ".", Packages: strings.Fields(string(out))}
	if write != "" {
		return apicompat.Snapshot(ctx, o, write)
	}
	return apicompat.Check(ctx, o)
}
