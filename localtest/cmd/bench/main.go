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
	n := flag.Int("n", 0, "requests per latency scenario (default 300; 5 with -short)")
	short := flag.Bool("short", false, "every scenario, at a few requests each: a check that the bench runs, not a measurement")
	flag.Parse()
	sc := full
	if *short {
		sc = short1
	}
	if *n > 0 {
		sc.N = *n
	}
	if err := run(context.Background(), *out, sc, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}
