package dynamostore_test

import (
	"crypto/rand"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/lambda-dedupe/dedupe/localtest/dynamoserver"
	"github.com/lambda-dedupe/dedupe/localtest/dynamotest"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe/dedupetest"
	"github.com/lambda-dedupe/dedupe/pkg/dynamostore"
)

// configHistories returns the number of configuration histories for a
// short run in make test, def, unless DEDUPE_CONFIG_HISTORIES asks for
// another number (0 leaves it to dedupetest.CheckConfigs, which reads
// it).
func configHistories(def int) int {
	if os.Getenv("DEDUPE_CONFIG_HISTORIES") != "" {
		return 0
	}
	return def
}

// TestCheckConfigs runs the configuration checker (issues 17 and 29) on
// dynamostore on the test endpoint (dynalite, or moto in make test's
// second pass): adapter, principal source, prefix, options and sharing
// drawn per history, and the store's own configuration with it
// (dedupetest.StoreConfig): LargeResults on moto's S3 with responses on
// both sides of the item limit, Lean, and faults injected in the HTTP
// transports under the real SDK clients: the table's (throttles,
// timeouts, lost replies, MRSC replicated-write conflicts) and S3's
// (throttles, timeouts, lost replies, refused uploads, missing objects,
// transfers cut mid-body).
//
// Every history needs an empty store. On the template's table that is a
// table per history, which costs a CreateTable, so only a few histories
// run there; the rest run on one single-table design table, each history
// under a sort key value of its own.
func TestCheckConfigs(t *testing.T) {
	c := testClient(t)
	raw, bucket := newS3(t, s3Endpoint(t))
	build := func(t *testing.T, sc dedupetest.StoreConfig, opts dynamostore.Options) dedupe.Store {
		client := faultyClient(t, func(op string) dedupetest.Fault { return sc.Inject("DynamoDB." + op) })
		opts.Lean = sc.Lean
		if opts.Lean {
			opts.Index = ""
		}
		if sc.LargeAbove > 0 {
			opts.MaxItemBytes, opts.CompressAbove = sc.LargeAbove, -1
			opts.LargeResults = dynamostore.LargeResults{Client: faultyS3(raw, sc.Inject), Bucket: bucket}
		}
		s, err := dynamostore.New(client, opts)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	t.Run("template table", func(t *testing.T) {
		// The key schema is one more dimension: the histories alternate
		// between the template's table (keyed by reference) and a classic
		// one.
		var histories atomic.Int64
		dedupetest.CheckConfigs(t, dedupetest.ConfigCheck{
			Histories: configHistories(4),
			NewStoreFor: func(t *testing.T, sc dedupetest.StoreConfig) dedupe.Store {
				classic := histories.Add(1)%2 == 0
				t.Logf("key schema: classic %v", classic)
				return build(t, sc, dynamostore.Options{Table: schemaTable(t, c, classic)})
			},
		})
	})
	t.Run("single table", func(t *testing.T) {
		table := dynamotest.UniqueName("dedupe-configs")
		createTable(t, c, table, schema{
			pk: "PK", sk: "SK", shard: "GSI1PK", lease: "lease_ms", index: "GSI1",
			projectedKeys: []string{"own", "st", "created_at"},
		})
		attrs := dynamostore.Attributes{
			PartitionKey: "PK", Status: "st", Owner: "own", LeaseExpiresAt: "lease_ms",
			ExpiresAt: "ttl", InflightShard: "GSI1PK", ResBody: "body",
		}
		// moto answers each call several times slower than dynalite. A
		// long run: DEDUPE_CONFIG_HISTORIES (docs/development.md).
		n := 40
		if dynamoserver.ServerKind() == dynamoserver.Moto {
			n = 20
		}
		dedupetest.CheckConfigs(t, dedupetest.ConfigCheck{
			Histories: configHistories(n),
			NewStoreFor: func(t *testing.T, sc dedupetest.StoreConfig) dedupe.Store {
				return build(t, sc, dynamostore.Options{
					Table: table, SortKey: dynamostore.SortKey{Name: "SK", Value: "IDEMPOTENCY#" + rand.Text()},
					Attributes: attrs, Index: "GSI1",
				})
			},
		})
	})
}

// faultyS3 returns an S3 client like raw (path-style, on the same
// endpoint) whose transport asks inject about every object call, with
// the SDK's standard retryer (3 attempts) minus its backoff sleeps.
func faultyS3(raw *s3.Client, inject dedupetest.Injector) *s3.Client {
	return s3.New(raw.Options(), func(o *s3.Options) {
		o.HTTPClient = faultS3HTTP{next: awshttp.NewBuildableClient(), inject: inject}
		o.Retryer = retry.NewStandard(func(so *retry.StandardOptions) {
			so.MaxAttempts = 3
			so.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 0, nil })
			so.RateLimiter = ratelimit.None
		})
	})
}

// faultS3HTTP is an S3 client's HTTP transport with faults injected below
// the SDK, by operation: "S3.PutObject" (PUT) and "S3.GetObject" (GET).
type faultS3HTTP struct {
	next   aws.HTTPClient
	inject dedupetest.Injector
}

// s3Error is an S3 error response.
func s3Error(r *http.Request, status int, code string) *http.Response {
	body := `<?xml version="1.0" encoding="UTF-8"?><Error><Code>` + code + `</Code><Message>injected</Message></Error>`
	return &http.Response{
		StatusCode: status, Status: http.StatusText(status), Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:  http.Header{"Content-Type": {"application/xml"}},
		Body:    io.NopCloser(strings.NewReader(body)),
		Request: r, ContentLength: int64(len(body)),
	}
}

// Do implements aws.HTTPClient.
func (f faultS3HTTP) Do(r *http.Request) (*http.Response, error) {
	op := ""
	switch r.Method {
	case http.MethodPut:
		op = "S3.PutObject"
	case http.MethodGet:
		op = "S3.GetObject"
	default:
		return f.next.Do(r)
	}
	switch f.inject(op) {
	case dedupetest.FaultLostReply:
		if resp, err := f.next.Do(r); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		return nil, &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
	case dedupetest.FaultThrottle:
		return s3Error(r, http.StatusServiceUnavailable, "SlowDown"), nil
	case dedupetest.FaultTimeout:
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: timeoutErr{}}
	case dedupetest.FaultDenied:
		return s3Error(r, http.StatusForbidden, "AccessDenied"), nil
	case dedupetest.FaultMissing:
		// The object is gone (a lifecycle that expired it early): delete
		// it, then let the read find it missing.
		del := r.Clone(r.Context())
		del.Method, del.Body, del.ContentLength = http.MethodDelete, http.NoBody, 0
		if resp, err := f.next.Do(del); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	case dedupetest.FaultCut:
		resp, err := f.next.Do(r)
		if err == nil && resp.StatusCode == http.StatusOK {
			resp.Body = &cutBody{ReadCloser: resp.Body, left: resp.ContentLength / 2}
		}
		return resp, err
	}
	return f.next.Do(r)
}
