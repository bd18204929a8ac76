// Command versus is `make versus`: the guard at a git ref and the working
// tree's, measured side by side on one endpoint. See doc.go.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
)

func main() {
	ref := flag.String("ref", "HEAD", "the git ref (a commit, tag or branch) to measure the working tree against")
	n := flag.Int("n", 1000, "requests per scenario")
	short := flag.Bool("short", false, "5 requests per scenario: a check that the comparison runs, not a measurement")
	flag.Parse()
	if *short {
		*n = 5
	}
	if err := run(context.Background(), *ref, *n, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "versus:", err)
		os.Exit(1)
	}
}
