// Command bench is `make bench`: it measures the guard in one run and
// prints a table, writing the same figures to build/bench/bench.json and a
// chart to build/bench/bench.png. See doc.go.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
)

func main() {
	out := flag.String("out", "build/bench", "directory for bench.json and bench.png")
	n := flag.Int("n", 300, "requests per latency scenario")
	flag.Parse()
	if err := run(context.Background(), *out, *n, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}
