package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/lambda-dedupe/dedupe/infra"
	"github.com/lambda-dedupe/dedupe/localtest/dynalite"
	"github.com/lambda-dedupe/dedupe/localtest/gateway"
)

// options are the command-line settings.
type options struct {
	Port           int
	ReaperInterval time.Duration
	Concurrency    int
	QueueWait      time.Duration
	BuildDir       string
	RIE            string
	Verbose        bool
	// Smoke makes run send the quick start's payment twice once the
	// stack is up, check that the second is the first's replay, and stop:
	// make test runs `make run` so (TestMakeRunSmoke).
	Smoke bool
}

// run starts the stack, prints where it listens, serves until ctx ends,
// then stops everything it started.
func run(ctx context.Context, o options, out io.Writer) error {
	root, err := infra.ModuleRoot()
	if err != nil {
		return err
	}
	abs := func(p string) string {
		if filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(root, p)
	}
	tplPath, err := infra.FindTemplate()
	if err != nil {
		return err
	}
	tpl, err := infra.Load(tplPath)
	if err != nil {
		return err
	}
	fns, err := infra.Functions(tpl)
	if err != nil {
		return err
	}
	tables, err := infra.Tables(tpl)
	if err != nil {
		return err
	}

	// (1) The bootstraps, built by make for this machine.
	var missing []string
	for _, f := range fns {
		p := filepath.Join(abs(o.BuildDir), gateway.BootstrapName(f.LogicalID), "bootstrap")
		if _, err := os.Stat(p); err != nil {
			rel, _ := filepath.Rel(root, p)
			missing = append(missing, rel)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing bootstrap(s): %s\nbuild them with `make build-local` (`make run` does it for you)", strings.Join(missing, ", "))
	}
	rie := abs(o.RIE)
	if built, err := gateway.BuildRIE(ctx, root, rie); err != nil {
		return fmt.Errorf("build the Lambda Runtime Interface Emulator: %w", err)
	} else if built {
		fmt.Fprintf(out, "built %s\n", rie)
	}

	// The API's port, taken before anything starts, so that a busy port
	// fails fast.
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(o.Port)))
	if err != nil {
		return fmt.Errorf("listen on port %d (choose another with -port or DEDUPE_PORT): %w", o.Port, err)
	}
	defer ln.Close()

	// (2) DynamoDB: the user's endpoint, or dynalite.
	endpoint, dynamoNote := os.Getenv(dynalite.EnvEndpoint), "from AWS_ENDPOINT_URL_DYNAMODB"
	if endpoint == "" {
		srv, err := dynalite.Start(ctx, dynalite.Options{})
		if err != nil {
			return err
		}
		defer func() {
			if err := srv.Stop(); err != nil {
				fmt.Fprintln(out, "stop dynalite:", err)
			}
		}()
		endpoint, dynamoNote = srv.Endpoint(), "dynalite, in memory"
	}

	// (3) The tables, exactly as the template declares them.
	client := dynamodb.NewFromConfig(aws.Config{
		Region: gateway.DefaultRegion,
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "local", SecretAccessKey: "local", Source: "dedupe-local"}, nil
		}),
	}, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(endpoint) })
	tctx, cancel := context.WithTimeout(ctx, time.Minute)
	results, err := infra.EnsureTables(tctx, client, tables)
	cancel()
	if err != nil {
		return fmt.Errorf("create tables on %s: %w", endpoint, err)
	}

	// (4) The functions and the gateway.
	stack, err := gateway.NewStack(gateway.StackConfig{
		Functions:      fns,
		BootstrapDir:   abs(o.BuildDir),
		RIE:            rie,
		Env:            map[string]string{dynalite.EnvEndpoint: endpoint},
		MaxConcurrency: o.Concurrency,
		QueueTimeout:   o.QueueWait,
		Output:         out,
		Verbose:        o.Verbose,
		Logger:         log.New(out, "", log.Ltime|log.Lmicroseconds),
	})
	if err != nil {
		return err
	}
	defer stack.Close()
	server := &http.Server{Handler: stack.Gateway, ReadHeaderTimeout: 10 * time.Second}
	serveErr := make(chan error, 1)
	go func() { serveErr <- server.Serve(ln) }()

	// (6) Where everything listens.
	base := "http://" + ln.Addr().String()
	printBanner(out, base, endpoint, dynamoNote, results, stack, o)
	if o.Smoke {
		return smoke(ctx, out, base)
	}

	// (5) The schedules, on the local interval.
	var tick <-chan time.Time
	if o.ReaperInterval > 0 && len(stack.Schedules()) > 0 {
		t := time.NewTicker(o.ReaperInterval)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-tick:
			for _, sc := range stack.Schedules() {
				if sc.Schedule.Enabled {
					runSchedule(ctx, out, stack, sc)
				}
			}
			continue
		case err := <-serveErr:
			return fmt.Errorf("serve: %w", err)
		case <-ctx.Done():
		}
		break
	}

	fmt.Fprintln(out, "\nstopping...")
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := server.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		fmt.Fprintln(out, "shutdown:", err)
	}
	stack.Close()
	// dynalite stops in the deferred call.
	fmt.Fprintln(out, "stopped")
	return nil
}

// smoke sends the quick start's payment twice, signed in the form the
// local gateway checks, and wants 201 and then its replay.
func smoke(ctx context.Context, out io.Writer, base string) error {
	send := func() (int, string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/payments",
			strings.NewReader(`{"amount":1000,"currency":"EUR","source":"tok_visa"}`))
		if err != nil {
			return 0, "", err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "smoke-1")
		req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=alice/20260101/us-east-1/execute-api/aws4_request, SignedHeaders=host;x-amz-date, Signature=00")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, resp.Header.Get("Idempotent-Replayed"), nil
	}
	first, _, err := send()
	if err != nil {
		return fmt.Errorf("smoke: %w", err)
	}
	second, replayed, err := send()
	if err != nil {
		return fmt.Errorf("smoke: %w", err)
	}
	if first != http.StatusCreated || second != http.StatusCreated || replayed != "true" {
		return fmt.Errorf("smoke: POST /payments answered %d, then %d (Idempotent-Replayed %q); want 201, then the replay", first, second, replayed)
	}
	fmt.Fprintln(out, "smoke: POST /payments 201, then 201 with Idempotent-Replayed: true; stopping")
	return nil
}

// runSchedule invokes one scheduled function and prints its result: for the
// reaper, the counts of what it cleared.
func runSchedule(ctx context.Context, out io.Writer, stack *gateway.Stack, sc gateway.StackSchedule) {
	start := time.Now()
	result, err := stack.InvokeSchedule(ctx, sc)
	took := time.Since(start).Round(time.Millisecond)
	ts := time.Now().Format("15:04:05.000000")
	if err != nil {
		fmt.Fprintf(out, "%s schedule %s.%s failed after %v: %v\n", ts, sc.Function, sc.Event, took, err)
		return
	}
	var report struct {
		Found, Cleared, Skipped, Errors int
		Truncated                       bool
	}
	if json.Unmarshal(result, &report) == nil && strings.Contains(string(result), `"cleared"`) {
		fmt.Fprintf(out, "%s %s: found=%d cleared=%d skipped=%d errors=%d truncated=%v (%v)\n",
			ts, sc.Function, report.Found, report.Cleared, report.Skipped, report.Errors, report.Truncated, took)
		return
	}
	fmt.Fprintf(out, "%s %s: %s (%v)\n", ts, sc.Function, result, took)
}

// printBanner prints where everything listens and a quick start.
func printBanner(out io.Writer, base, endpoint, dynamoNote string, tables []infra.TableResult, stack *gateway.Stack, o options) {
	var b strings.Builder
	fmt.Fprintf(&b, "\ndedupe local stack is up\n\n")
	fmt.Fprintf(&b, "  API Gateway (HTTP API)  %s\n", base)
	for _, r := range stack.Routes() {
		fmt.Fprintf(&b, "      %-22s -> %s\n", r.Key, r.Function)
	}
	fmt.Fprintf(&b, "  DynamoDB                %s (%s)\n", endpoint, dynamoNote)
	for _, t := range tables {
		state := "kept"
		if t.Created {
			state = "created"
		}
		fmt.Fprintf(&b, "      table %-18s %s\n", t.TableName, state)
	}
	fmt.Fprintf(&b, "  Functions               under aws-lambda-rie, up to %d execution environments each\n", max(o.Concurrency, 1))
	for _, sc := range stack.Schedules() {
		every := "disabled (-reaper-interval 0)"
		if o.ReaperInterval > 0 {
			every = "every " + o.ReaperInterval.String() + " (template: " + sc.Schedule.Expression + ")"
		}
		fmt.Fprintf(&b, "  Schedule                %s.%s %s\n", sc.Function, sc.Event, every)
	}
	fmt.Fprintf(&b, "\nQuick start (paste into another terminal). The routes are behind AWS_IAM, as deployed:\n")
	fmt.Fprintf(&b, "sign with any key; its access key ID names the caller (an unsigned request gets 403).\n\n")
	fmt.Fprintf(&b, "  curl -i --aws-sigv4 'aws:amz:us-east-1:execute-api' --user 'alice:local' -X POST %s/payments \\\n", base)
	fmt.Fprintf(&b, "    -H 'Content-Type: application/json' -H 'Idempotency-Key: demo-1' \\\n")
	fmt.Fprintf(&b, "    -d '{\"amount\":1000,\"currency\":\"EUR\",\"source\":\"tok_visa\"}'\n")
	fmt.Fprintf(&b, "  # run it again: same body, plus Idempotent-Replayed: true\n")
	fmt.Fprintf(&b, "  curl -s --aws-sigv4 'aws:amz:us-east-1:execute-api' --user 'alice:local' %s/payments\n", base)
	fmt.Fprintf(&b, "  # exactly one payment. Other test sources: tok_chargeDeclined, tok_processorError, tok_slow, tok_panic, tok_timeout\n")
	fmt.Fprintf(&b, "\nOne log line per request below. Ctrl-C stops everything.\n\n")
	io.WriteString(out, b.String())
}
