// Command local runs the whole stack of template.yaml on this machine: the
// functions' bootstraps under the Lambda Runtime Interface Emulator, a local
// API Gateway (HTTP API) for their HttpApi routes, the tables on dynalite
// (or on the endpoint in AWS_ENDPOINT_URL_DYNAMODB), and the reaper on a
// timer. `make run` builds the bootstraps into build/local and runs it.
//
// Usage:
//
//	go run ./localtest/cmd/local [-port 3000] [-reaper-interval 30s] [-concurrency 16]
//
// Ctrl-C (or SIGTERM) stops everything it started.
//
// Flags and their environment variables: -port (DEDUPE_PORT, default 3000;
// 0 picks a free port), -reaper-interval (DEDUPE_REAPER_INTERVAL, default
// 30s; 0 disables the schedules), -concurrency (DEDUPE_CONCURRENCY,
// default 16 execution environments per function, then 429), -queue-wait,
// -build-dir, -rie, -verbose and -smoke (send the quick start's payment
// twice, check the replay, stop: what make test runs); -h lists them.
package main
