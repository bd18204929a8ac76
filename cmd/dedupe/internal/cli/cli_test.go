package cli_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/lambda-dedupe/dedupe/cmd/dedupe/internal/cli"
	"github.com/lambda-dedupe/dedupe/localtest/dynalite"
	"github.com/lambda-dedupe/dedupe/localtest/dynamotest"
	"github.com/lambda-dedupe/dedupe/localtest/pgtest"
	"github.com/lambda-dedupe/dedupe/localtest/redistest"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/dynamostore"
	"github.com/lambda-dedupe/dedupe/pkg/memstore"
	"github.com/lambda-dedupe/dedupe/pkg/pgstore"
	"github.com/lambda-dedupe/dedupe/pkg/redisstore"
)

// prefix is the guard prefix of the tests: the function's name.
const prefix = "payments-ApiFunction-x1"

// backend is one store under test: the store the guard writes through and
// the flags with which the command opens the same records.
type backend struct {
	name  string
	store dedupe.Store
	flags []string
	// dynamo and table are the DynamoDB client and table, on dynamodb.
	dynamo *dynamodb.Client
	table  string
}

// dynamoBackend opens the template's table (keyed by reference) on
// dynalite, or moto under withdynalite -server moto, with the credentials
// the command signs with.
func dynamoBackend(t *testing.T) backend {
	t.Helper()
	t.Setenv("AWS_ACCESS_KEY_ID", "x")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "x")
	t.Setenv("AWS_REGION", "us-east-1")
	endpoint := dynalite.Endpoint(t)
	client := dynamotest.Client(t)
	table := dynamotest.CreateTables(t, client, dynamotest.IdempotencyTableID)[dynamotest.IdempotencyTableID]
	ds, err := dynamostore.New(client, dynamostore.Options{Table: table})
	if err != nil {
		t.Fatal(err)
	}
	return backend{name: "dynamodb", store: ds, flags: []string{"--table", table, "--endpoint", endpoint}, dynamo: client, table: table}
}

// backends opens every store the environment provides; each needs its
// server (withdynalite, withservers), and its absence fails the test.
func backends(t *testing.T) []backend {
	t.Helper()
	ctx := context.Background()
	var out []backend

	out = append(out, dynamoBackend(t))

	// Redis, under a prefix of its own.
	opts, err := redis.ParseURL(redistest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	rc := redis.NewClient(opts)
	t.Cleanup(func() { rc.Close() })
	rp := "clitest:" + rand.Text()[:8] + ":"
	rs, err := redisstore.New(rc, redisstore.Options{Prefix: rp, RefIndex: true})
	if err != nil {
		t.Fatal(err)
	}
	out = append(out, backend{name: "redis", store: rs, flags: []string{"--redis", redistest.URL(t), "--redis-prefix", rp}})

	// Redis Cluster, when the environment has one (withservers starts
	// it; CI requires it): the command reads a cluster URL.
	if os.Getenv(redistest.EnvClusterURL) != "" || os.Getenv(redistest.EnvCI) != "" {
		curl := redistest.ClusterURL(t)
		copts, err := redis.ParseClusterURL(curl)
		if err != nil {
			t.Fatal(err)
		}
		cc := redis.NewClusterClient(copts)
		t.Cleanup(func() { cc.Close() })
		cs, err := redisstore.New(cc, redisstore.Options{Prefix: rp, RefIndex: true})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, backend{name: "redis cluster", store: cs, flags: []string{"--redis", curl, "--redis-prefix", rp}})
	}

	// PostgreSQL, in a table of its own.
	pool, err := pgxpool.New(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	pt := "clitest_" + strings.ToLower(rand.Text()[:10])
	if err := pgstore.CreateSchema(ctx, pool, pt); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Exec(context.Background(), "DROP TABLE IF EXISTS "+pt) })
	ps, err := pgstore.New(pool, pgstore.Options{Table: pt})
	if err != nil {
		t.Fatal(err)
	}
	out = append(out, backend{name: "postgres", store: ps, flags: []string{"--postgres", pgtest.URL(t), "--pg-table", pt}})
	return out
}

// run runs the command and returns its exit code, stdout and stderr.
func run(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := cli.Run(context.Background(), cli.Env{
		Args: args, Stdin: strings.NewReader(stdin), Stdout: &stdout, Stderr: &stderr,
		Getenv: func(k string) string {
			if k == "USER" {
				return "oncall-alice"
			}
			return ""
		},
	})
	return code, stdout.String(), stderr.String()
}

// decodeJSON decodes out into v, failing the test if it is not JSON.
func decodeJSON(t *testing.T, out string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out)
	}
}

// loggedEvents returns the "dedupe: request" events in a JSON log.
func loggedEvents(t *testing.T, log *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(log.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line is not JSON: %v: %s", err, line)
		}
		if m["msg"] == "dedupe: request" {
			out = append(out, m)
		}
	}
	return out
}

// TestComplaint follows "order-42 was charged but the client got 409" on
// every store: a payment runs and its answer is lost, the client's retry
// arrives while it runs (409), and the operator goes from the 409's log
// line to the record, its request ID and its response, then lets the key
// run again.
func TestComplaint(t *testing.T) {
	event, err := os.ReadFile("testdata/order-42.json")
	if err != nil {
		t.Fatal(err)
	}
	var req events.APIGatewayV2HTTPRequest
	if err := json.Unmarshal(event, &req); err != nil {
		t.Fatal(err)
	}
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			var log bytes.Buffer
			g := dedupe.New(b.store, &dedupe.Config{Prefix: prefix, Logger: slog.New(slog.NewJSONHandler(&log, nil))})
			var h func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error)
			charged := 0
			h = dedupe.HTTPAPI(g, nil, func(ctx context.Context, r events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
				charged++
				if charged == 1 {
					// The client's retry arrives while the charge runs.
					retry := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "req-retry"})
					resp, err := h(retry, r)
					if err != nil || resp.StatusCode != http.StatusConflict {
						t.Errorf("retry in flight = %d, %v; want 409", resp.StatusCode, err)
					}
				}
				return events.APIGatewayV2HTTPResponse{StatusCode: 201, Body: `{"id":"pay_1","status":"charged"}`}, nil
			})
			ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "req-first"})
			ctx = dedupe.WithTrace(ctx, "Root=1-6761f3b2-3f4a1c2b5d6e7f8091a2b3c4;Sampled=1")
			if resp, err := h(ctx, req); err != nil || resp.StatusCode != 201 {
				t.Fatalf("first request = %d, %v; want 201", resp.StatusCode, err)
			}
			evs := loggedEvents(t, &log)
			if len(evs) != 2 || evs[0]["outcome"] != dedupe.OutcomeInProgress || evs[0]["status"] != 409.0 {
				t.Fatalf("events = %v; want the retry's 409, then the execution", evs)
			}
			conflict := evs[0]
			if conflict["request_id"] != "req-retry" || conflict["original_request_id"] != "req-first" {
				t.Errorf("409 event names request %v, original %v; want req-retry, req-first", conflict["request_id"], conflict["original_request_id"])
			}
			ref := conflict["key"].(string)

			// 1. The log line's ref, recomputed from the saved event.
			code, out, errOut := run(t, "", "key", "--event", "testdata/order-42.json", "--prefix", prefix, "-o", "json")
			if code != cli.ExitOK {
				t.Fatalf("key: exit %d: %s", code, errOut)
			}
			var key struct{ Ref, StoredKey, Route, ClientKey, Principal string }
			decodeJSON(t, out, &key)
			if key.Ref != ref || key.Route != "POST /payments" || key.ClientKey != "order-42" {
				t.Errorf("key from event = %+v; want ref %s", key, ref)
			}
			// The same from its parts.
			code, out, _ = run(t, "", "key", "--prefix", prefix, "--api", "http:r3pmxmplak/$default", "--route", "POST /payments",
				"--principal", key.Principal, "--key", "order-42", "-o", "json")
			var fromParts struct{ Ref string }
			decodeJSON(t, out, &fromParts)
			if code != cli.ExitOK || fromParts.Ref != ref {
				t.Errorf("key from parts = %d, %s; want %s", code, fromParts.Ref, ref)
			}

			// 2. The record, from the ref alone: completed by req-first.
			code, out, errOut = run(t, "", append([]string{"show", ref, "-o", "json"}, b.flags...)...)
			if code != cli.ExitOK {
				t.Fatalf("show: exit %d: %s", code, errOut)
			}
			var rec struct {
				Key, Status, Owner, RequestID, Trace string
				ResponseStatus, ResponseBytes        int
			}
			decodeJSON(t, out, &rec)
			if rec.Key != key.StoredKey || rec.Status != "COMPLETED" || rec.RequestID != "req-first" ||
				!strings.HasPrefix(rec.Trace, "Root=1-") || rec.ResponseStatus != 201 || rec.ResponseBytes == 0 {
				t.Errorf("show = %+v; want COMPLETED by req-first with a 201", rec)
			}
			code, out, _ = run(t, "", append([]string{"show", ref, "--body"}, b.flags...)...)
			if code != cli.ExitOK || !strings.Contains(out, `"charged"`) {
				t.Errorf("show --body = %d, %q; want the stored body", code, out)
			}
			code, out, _ = run(t, "", append([]string{"show", ref}, b.flags...)...)
			if code != cli.ExitOK || !strings.Contains(out, "request id:   req-first") {
				t.Errorf("show (text) = %d:\n%s", code, out)
			}

			// 3. Forget is fenced and confirmed.
			if code, _, _ := run(t, "", append([]string{"release", ref, "--token", rec.Owner}, b.flags...)...); code != cli.ExitRefused {
				t.Errorf("release of a completed record: exit %d, want %d", code, cli.ExitRefused)
			}
			if code, _, _ := run(t, "no\n", append([]string{"forget", ref, "--token", rec.Owner, "--reason", "ticket 4711"}, b.flags...)...); code != cli.ExitRefused {
				t.Errorf("forget not confirmed: exit %d, want %d", code, cli.ExitRefused)
			}
			if code, _, _ := run(t, "", append([]string{"forget", ref, "--token", "not-the-owner", "--reason", "ticket 4711", "--yes"}, b.flags...)...); code != cli.ExitRefused {
				t.Errorf("forget with another token: exit %d, want %d", code, cli.ExitRefused)
			}
			code, out, errOut = run(t, "yes\n", append([]string{"forget", ref, "--token", rec.Owner, "--reason", "ticket 4711"}, b.flags...)...)
			if code != cli.ExitOK || !strings.Contains(out, "may still replay") ||
				!strings.Contains(errOut, `"operator":"oncall-alice"`) || !strings.Contains(errOut, `"reason":"ticket 4711"`) {
				t.Errorf("forget = %d:\n%s\n%s", code, out, errOut)
			}
			if code, _, _ := run(t, "", append([]string{"show", ref}, b.flags...)...); code != cli.ExitNotFound {
				t.Errorf("show after forget: exit %d, want %d", code, cli.ExitNotFound)
			}
			// The key runs again.
			if resp, err := h(lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "req-again"}), req); err != nil || resp.StatusCode != 201 || charged != 2 {
				t.Errorf("after forget = %d, %v, %d charges; want a second run", resp.StatusCode, err, charged)
			}
		})
	}
}

// TestStuckKey leaves a record whose owner died, then lists and releases
// it on every store.
func TestStuckKey(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			now := time.Now()
			key := dedupe.StoreKey(prefix, "stuck/"+rand.Text())
			res, err := b.store.Claim(ctx, dedupe.ClaimRequest{Key: key, Fingerprint: "fp", Token: "tok-dead",
				Now: now.Add(-time.Minute), LeaseUntil: now.Add(-30 * time.Second), ExpiresAt: now.Add(time.Hour), RequestID: "req-dead"})
			if err != nil || !res.Acquired {
				t.Fatalf("Claim = %+v, %v", res, err)
			}
			ref := dedupe.KeyRef(key)
			code, out, errOut := run(t, "", append([]string{"stranded", "-o", "json", "--limit", "1000"}, b.flags...)...)
			if code != cli.ExitOK {
				t.Fatalf("stranded: exit %d: %s", code, errOut)
			}
			var list struct {
				Records []struct{ Ref, Owner, RequestID string }
			}
			decodeJSON(t, out, &list)
			found := false
			for _, r := range list.Records {
				found = found || (r.Ref == ref && r.Owner == "tok-dead" && r.RequestID == "req-dead")
			}
			if !found {
				t.Fatalf("stranded does not list %s: %s", ref, out)
			}
			code, out, _ = run(t, "", append([]string{"show", ref}, b.flags...)...)
			if code != cli.ExitOK || !strings.Contains(out, "stranded") || !strings.Contains(out, "request id:   req-dead") {
				t.Errorf("show = %d:\n%s", code, out)
			}
			if code, _, _ := run(t, "", append([]string{"forget", ref, "--token", "tok-dead", "--reason", "x", "--yes"}, b.flags...)...); code != cli.ExitRefused {
				t.Errorf("forget of an in-flight record: exit %d, want %d", code, cli.ExitRefused)
			}
			if code, _, _ := run(t, "", append([]string{"release", ref, "--token", "tok-other"}, b.flags...)...); code != cli.ExitRefused {
				t.Errorf("release with another token: exit %d, want %d", code, cli.ExitRefused)
			}
			if code, _, errOut := run(t, "", append([]string{"release", ref, "--token", "tok-dead"}, b.flags...)...); code != cli.ExitOK {
				t.Fatalf("release: exit %d: %s", code, errOut)
			}
			rec, err := b.store.Get(ctx, key, time.Now())
			if err != nil || rec.Fingerprint != "fp" || rec.LeaseExpiresAt.UnixMilli() != 0 {
				t.Errorf("after release = %+v, %v; want the record kept, its lease ended", rec, err)
			}
			code, out, _ = run(t, "", append([]string{"inflight", "-o", "json", "--limit", "1000"}, b.flags...)...)
			if code != cli.ExitOK || strings.Contains(out, ref) {
				t.Errorf("inflight after release = %d, still lists %s", code, ref)
			}
		})
	}
}

func TestUsage(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want int
	}{
		{"no command", nil, cli.ExitUsage},
		{"help", []string{"help"}, cli.ExitOK},
		{"unknown command", []string{"scan"}, cli.ExitUsage},
		{"key without parts", []string{"key", "--prefix", "f"}, cli.ExitUsage},
		{"key without prefix", []string{"key", "--api", "a", "--route", "r", "--shared", "--key", "k"}, cli.ExitUsage},
		{"key with a bad client key", []string{"key", "--prefix", "f", "--api", "a", "--route", "r", "--shared", "--key", "a,b"}, cli.ExitUsage},
		{"show a malformed ref", []string{"show", "key:xyz", "--table", "t"}, cli.ExitUsage},
		{"show without a store", []string{"show", "key:0123456789ab"}, cli.ExitUsage},
		{"show with two stores", []string{"show", "key:0123456789ab", "--table", "t", "--redis", "redis://x"}, cli.ExitUsage},
		{"release without token", []string{"release", "key:0123456789ab", "--table", "t"}, cli.ExitUsage},
		{"forget without reason", []string{"forget", "key:0123456789ab", "--table", "t", "--token", "x"}, cli.ExitUsage},
		{"bad output", []string{"key", "-o", "yaml"}, cli.ExitUsage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, _, errOut := run(t, "", tt.args...); got != tt.want {
				t.Errorf("exit = %d, want %d (%s)", got, tt.want, errOut)
			}
		})
	}
}

// TestKeyMatchesGuard checks that key computes what the guard stores,
// for random client keys, with and without a prefix.
func TestKeyMatchesGuard(t *testing.T) {
	for i := range 50 {
		ck := strings.ReplaceAll(rand.Text(), "A", "|") + "%" // '|' and '%' are escaped
		p := prefix
		args := []string{"key", "--prefix", p}
		if i%2 == 1 {
			p, args = "", []string{"key", "--no-prefix"}
		}
		code, out, errOut := run(t, "", append(args, "--api", "rest:abc/prod", "--route", "POST /a|b", "--principal", "iam:arn", "--key", ck, "-o", "json")...)
		if code != cli.ExitOK {
			t.Fatalf("key: exit %d: %s", code, errOut)
		}
		var got struct{ StoredKey string }
		decodeJSON(t, out, &got)
		cfg := &dedupe.Config{Prefix: p, Unprefixed: p == ""}
		want := dedupe.New(memstore.New(), cfg).Key(dedupe.ScopeKey("rest:abc/prod", "POST /a|b", "iam:arn", ck))
		if got.StoredKey != want {
			t.Fatalf("stored key = %q, want %q", got.StoredKey, want)
		}
	}
}
