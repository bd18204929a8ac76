package dynamotest_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/lambda-dedupe/dedupe/localtest/dynamotest"
)

// recorder is a testing.TB that keeps its Errorf calls and runs its
// cleanups when told, so that a test can see what Client's cleanup says.
type recorder struct {
	testing.TB
	mu       sync.Mutex
	errors   []string
	cleanups []func()
}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func (r *recorder) Cleanup(f func()) { r.cleanups = append(r.cleanups, f) }

func (r *recorder) cleanup() {
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
}

// TestWithListingBudget: a client with a budget of n answers n Queries
// and Scans, refuses the next with ErrListingBudget without sending it,
// and fails its test at the end; other calls are not counted. A client
// without the option has no budget. The server is a
// stub answering every call with an empty page: what is tested is the
// client's middleware, not a server.
func TestWithListingBudget(t *testing.T) {
	const budget = 400
	var sent sync.Map
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		op := r.Header.Get("X-Amz-Target")
		n, _ := sent.LoadOrStore(op, new(int))
		*n.(*int)++
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		fmt.Fprint(w, `{"Items":[],"Count":0,"ScannedCount":0}`)
	}))
	defer srv.Close()
	rec := &recorder{TB: t}
	stub := func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(srv.URL) }
	c := dynamotest.Client(rec, stub, dynamotest.WithListingBudget(rec, budget))
	ctx := context.Background()
	table := aws.String("t")
	for i := range budget {
		var err error
		if i%2 == 0 {
			_, err = c.Query(ctx, &dynamodb.QueryInput{TableName: table})
		} else {
			_, err = c.Scan(ctx, &dynamodb.ScanInput{TableName: table})
		}
		if err != nil {
			t.Fatalf("listing %d of %d: %v", i+1, budget, err)
		}
	}
	if _, err := c.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: table}); err != nil {
		t.Fatalf("a DescribeTable past the budget: %v; want it sent", err)
	}
	if _, err := c.Query(ctx, &dynamodb.QueryInput{TableName: table}); !errors.Is(err, dynamotest.ErrListingBudget) {
		t.Fatalf("the Query past the budget: %v; want ErrListingBudget", err)
	}
	n, _ := sent.Load("DynamoDB_20120810.Query")
	if got := *n.(*int); got != budget/2 {
		t.Errorf("Queries sent = %d, want %d (the one past the budget is not sent)", got, budget/2)
	}
	if len(rec.errors) != 0 {
		t.Fatalf("failed before its end: %q", rec.errors)
	}
	rec.cleanup()
	if len(rec.errors) != 1 {
		t.Errorf("at the end: %q; want one error naming the budget", rec.errors)
	}
	unbounded := dynamotest.Client(t, stub)
	for i := range 2 * budget {
		if _, err := unbounded.Query(ctx, &dynamodb.QueryInput{TableName: table}); err != nil {
			t.Fatalf("Query %d without a budget: %v", i+1, err)
		}
	}
}
