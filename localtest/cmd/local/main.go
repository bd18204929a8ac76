package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"
)

func main() {
	var o options
	fs := flag.NewFlagSet("local", flag.ExitOnError)
	fs.IntVar(&o.Port, "port", envInt("DEDUPE_PORT", 3000), "port of the local API Gateway on 127.0.0.1; 0 picks a free one (env DEDUPE_PORT)")
	fs.DurationVar(&o.ReaperInterval, "reaper-interval", envDuration("DEDUPE_REAPER_INTERVAL", 30*time.Second), "how often the scheduled functions run; 0 disables (env DEDUPE_REAPER_INTERVAL)")
	fs.IntVar(&o.Concurrency, "concurrency", envInt("DEDUPE_CONCURRENCY", 16), "execution environments per function at most; more concurrent requests get 429 (env DEDUPE_CONCURRENCY)")
	fs.DurationVar(&o.QueueWait, "queue-wait", 0, "how long a request waits for a busy function's environment before 429 (0: throttle at once, as Lambda does)")
	fs.StringVar(&o.BuildDir, "build-dir", "build/local", "directory holding <function>/bootstrap, relative to the module root")
	fs.StringVar(&o.RIE, "rie", "build/bin/aws-lambda-rie", "aws-lambda-rie executable, relative to the module root; built with go build when missing")
	fs.BoolVar(&o.Verbose, "verbose", false, "also print the emulator's START/END/REPORT lines")
	fs.BoolVar(&o.Smoke, "smoke", false, "send the quick start's payment twice once the stack is up, check the replay, and stop")
	_ = fs.Parse(os.Args[1:])

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	stopWithParent()
	if err := run(ctx, o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "local:", err)
		os.Exit(1)
	}
}

// envInt returns the integer in the environment variable name, or def.
func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

// envDuration returns the duration in the environment variable name, or def.
func envDuration(name string, def time.Duration) time.Duration {
	if v, err := time.ParseDuration(os.Getenv(name)); err == nil {
		return v
	}
	return def
}
