// Package awscalls records the AWS API calls a program makes, so that a
// test can say which IAM actions, on which resources, the code really
// needs: the project's permissions table (infra.Permissions) is written
// from such recordings, and checked against them.
//
// A [Recorder] records in two ways: as SDK middleware on the clients a
// test builds ([Recorder.DynamoDB], [Recorder.S3]: one call per API
// call, retries not counted), and as a DynamoDB endpoint in front of a
// real one ([Recorder.Proxy]) for a program the test runs as a process,
// which names its endpoint itself (the dedupe command's --endpoint).
//
// Like net/http/httptest, it is meant to be imported by tests.
package awscalls

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/middleware"
)

// Call is one AWS API call.
type Call struct {
	// Service is the IAM service prefix: "dynamodb" or "s3".
	Service string
	// Operation is the API operation, e.g. "PutItem": with Service, the
	// IAM action ("dynamodb:PutItem").
	Operation string
	// Table and Index are a DynamoDB call's TableName and IndexName
	// ("" when it names none).
	Table, Index string
	// Bucket and Key are an S3 call's.
	Bucket, Key string
}

// Action returns the IAM action of the call, e.g. "dynamodb:PutItem".
func (c Call) Action() string { return c.Service + ":" + c.Operation }

// Recorder collects calls. It is safe for concurrent use.
type Recorder struct {
	mu    sync.Mutex
	calls []Call
}

// Calls returns the calls recorded so far, in order.
func (r *Recorder) Calls() []Call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

// Reset forgets the calls recorded so far.
func (r *Recorder) Reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = nil
}

func (r *Recorder) add(c Call) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, c)
}

// DynamoDB returns a client option that records every call of the
// client: dynamodb.New(opts, rec.DynamoDB()), or
// dynamotest.Client(t, rec.DynamoDB()).
func (r *Recorder) DynamoDB() func(*dynamodb.Options) {
	return func(o *dynamodb.Options) { o.APIOptions = append(o.APIOptions, r.middleware("dynamodb")) }
}

// S3 returns a client option that records every call of an S3 client.
func (r *Recorder) S3() func(*s3.Options) {
	return func(o *s3.Options) { o.APIOptions = append(o.APIOptions, r.middleware("s3")) }
}

// middleware records each call at the Initialize step, with the names it
// reads from the input (TableName, IndexName, Bucket, Key).
func (r *Recorder) middleware(service string) func(*middleware.Stack) error {
	return func(st *middleware.Stack) error {
		return st.Initialize.Add(middleware.InitializeMiddlewareFunc("awscalls", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			c := Call{Service: service, Operation: awsmiddleware.GetOperationName(ctx)}
			c.Table, c.Index = field(in.Parameters, "TableName"), field(in.Parameters, "IndexName")
			c.Bucket, c.Key = field(in.Parameters, "Bucket"), field(in.Parameters, "Key")
			r.add(c)
			return next.HandleInitialize(ctx, in)
		}), middleware.After)
	}
}

// field reads the *string field name of an SDK input struct, "" when it
// has none.
func field(params any, name string) string {
	v := reflect.ValueOf(params)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return ""
	}
	f := v.Elem().FieldByName(name)
	if !f.IsValid() || f.Kind() != reflect.Pointer || f.IsNil() || f.Elem().Kind() != reflect.String {
		return ""
	}
	return f.Elem().String()
}

// Proxy starts a DynamoDB endpoint that forwards every request to
// upstream and records it: the operation from X-Amz-Target, the table and
// index from the JSON body. It is stopped when the test ends.
func (r *Recorder) Proxy(t testing.TB, upstream string) string {
	t.Helper()
	u, err := url.Parse(upstream)
	if err != nil {
		t.Fatalf("awscalls: upstream %q: %v", upstream, err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
		if _, op, ok := strings.Cut(req.Header.Get("X-Amz-Target"), "."); ok {
			var names struct{ TableName, IndexName string }
			_ = json.Unmarshal(body, &names)
			r.add(Call{Service: "dynamodb", Operation: op, Table: names.TableName, Index: names.IndexName})
		}
		rp.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}
