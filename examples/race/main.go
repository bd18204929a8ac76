// Command race shows the race an idempotency check must win: it starts N
// processes at once (2, 10 and 50 by default) that each handle the same
// request, once with a naive check (read the key, do the work if it is
// absent, then write it) and once with the guard, against one DynamoDB
// endpoint, and prints how many of them did the work.
//
//	make race        # or: go run ./examples/race under withdynalite
//
// The endpoint is AWS_ENDPOINT_URL_DYNAMODB (make race starts dynalite).
// Each process is this command again (its environment says which part it
// plays), so the duplicates race across processes and connections as
// Lambda's execution environments do. Flags: -n (the sizes, "2,10,50") and
// -work (how long the work takes, 100ms).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

func main() {
	if os.Getenv(childEnv) != "" {
		os.Exit(child(context.Background(), os.Args[1:], os.Stdin, os.Stdout))
	}
	sizes := flag.String("n", "2,10,50", "how many duplicates race, per round")
	work := flag.Duration("work", 100*time.Millisecond, "how long the work takes")
	flag.Parse()
	var ns []int
	for _, s := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "race: -n %q: want positive numbers separated by commas\n", *sizes)
			os.Exit(2)
		}
		ns = append(ns, n)
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "race:", err)
		os.Exit(1)
	}
	endpoint := os.Getenv("AWS_ENDPOINT_URL_DYNAMODB")
	if endpoint == "" {
		fmt.Fprintln(os.Stderr, "race: set AWS_ENDPOINT_URL_DYNAMODB (make race starts dynalite for it)")
		os.Exit(2)
	}
	if _, err := run(context.Background(), os.Stdout, self, endpoint, ns, *work); err != nil {
		fmt.Fprintln(os.Stderr, "race:", err)
		os.Exit(1)
	}
}
