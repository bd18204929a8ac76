package dynamostore_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/lambda-dedupe/dedupe/localtest/dynamotest"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe/dedupetest"
	"github.com/lambda-dedupe/dedupe/pkg/dynamostore"
)

// faultHTTP is the client's HTTP transport with faults injected below the
// SDK, where the network really fails: the SDK's own retryer then resends
// what it believes was lost.
type faultHTTP struct {
	next   aws.HTTPClient
	inject dedupetest.Injector
}

// timeoutErr is a network timeout.
type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout (injected)" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

// Do implements aws.HTTPClient.
func (f faultHTTP) Do(r *http.Request) (*http.Response, error) {
	op := strings.TrimPrefix(r.Header.Get("X-Amz-Target"), "DynamoDB_20120810.")
	switch f.inject(op) {
	case dedupetest.FaultLostReply:
		// The server applies the call; its reply is lost.
		if resp, err := f.next.Do(r); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		return nil, &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
	case dedupetest.FaultThrottle:
		body := `{"__type":"com.amazonaws.dynamodb.v20120810#ThrottlingException","message":"Rate exceeded (injected)"}`
		return &http.Response{
			StatusCode: 400, Status: "400 Bad Request", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header:  http.Header{"Content-Type": {"application/x-amz-json-1.0"}},
			Body:    io.NopCloser(strings.NewReader(body)),
			Request: r, ContentLength: int64(len(body)),
		}, nil
	case dedupetest.FaultTimeout:
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: timeoutErr{}}
	case dedupetest.FaultConflict:
		// An MRSC global table: another Region writes the item; the write
		// is refused unapplied.
		body := `{"__type":"com.amazonaws.dynamodb.v20120810#ReplicatedWriteConflictException","message":"one or more items are being modified by a request in another Region (injected)"}`
		return &http.Response{
			StatusCode: 400, Status: "400 Bad Request", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header:  http.Header{"Content-Type": {"application/x-amz-json-1.0"}},
			Body:    io.NopCloser(strings.NewReader(body)),
			Request: r, ContentLength: int64(len(body)),
		}, nil
	}
	return f.next.Do(r)
}

// faultyClient returns a client on the test endpoint whose transport asks
// inject about every call, with the SDK's standard retryer (3 attempts)
// minus its backoff sleeps and retry quota, so histories run fast.
func faultyClient(t testing.TB, inject dedupetest.Injector) *dynamodb.Client {
	return testClient(t, func(o *dynamodb.Options) {
		o.HTTPClient = faultHTTP{next: awshttp.NewBuildableClient(), inject: inject}
		o.Retryer = retry.NewStandard(func(so *retry.StandardOptions) {
			so.MaxAttempts = 3
			so.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 0, nil })
			so.RateLimiter = ratelimit.None
		})
	})
}

// TestCheck runs the randomized fault-injecting checker on dynamostore,
// with faults injected in the HTTP transport under the real SDK client.
func TestCheck(t *testing.T) {
	for _, sc := range schemas {
		t.Run(sc.name, func(t *testing.T) {
			table := schemaTable(t, testClient(t), sc.classic)
			dedupetest.Check(t, dedupetest.CheckConfig{
				Histories: checkHistories(),
				NewStore: func(t *testing.T, inject dedupetest.Injector) dedupe.Store {
					s, err := dynamostore.New(faultyClient(t, inject), dynamostore.Options{Table: table})
					if err != nil {
						t.Fatal(err)
					}
					return s
				},
			})
		})
	}
}

// checkHistories keeps the DynamoDB checker short in make test unless
// DEDUPE_CHECK_HISTORIES asks for more.
func checkHistories() int {
	if testing.Short() {
		return 3
	}
	return 0 // the default, or DEDUPE_CHECK_HISTORIES
}

// TestClaimReplyLostThenRetried checks issue 9, case 4 on the wire: the
// claim's UpdateItem is applied, its reply is lost, and the SDK sends it
// again. The retry meets the owner's own record and must be taken as the
// owner's claim, not answered 409.
func TestClaimReplyLostThenRetried(t *testing.T) {
	table := dynamotest.CreateTables(t, testClient(t), "IdempotencyTable")["IdempotencyTable"]
	lost := 0
	inject := func(op string) dedupetest.Fault {
		if op == "UpdateItem" && lost == 0 { // the claim

			lost++
			return dedupetest.FaultLostReply
		}
		return dedupetest.FaultNone
	}
	s, err := dynamostore.New(faultyClient(t, inject), dynamostore.Options{Table: table})
	if err != nil {
		t.Fatal(err)
	}
	g := dedupe.New(s, &dedupe.Config{Prefix: "lost-reply"})
	runs := 0
	out, err := g.Do(context.Background(), dedupe.Call{Key: "order-42", Fingerprint: "fp"}, func(context.Context) (dedupe.Result, error) {
		runs++
		return dedupe.Result{StatusCode: 201, Body: []byte("charged")}, nil
	})
	if err != nil || runs != 1 || !out.Stored || lost != 1 {
		t.Fatalf("Run = %+v, %v after %d runs, %d lost replies; want stored after 1 run and 1 lost reply", out, err, runs, lost)
	}
	var conflict *dedupe.ConflictError
	if errors.As(err, &conflict) {
		t.Fatalf("owner answered with its own conflict: %v", err)
	}
}
