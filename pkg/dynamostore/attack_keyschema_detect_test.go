package dynamostore_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/dynamostore"
)

// cancelAwareDescribe throttles the first DescribeTable (New's), then
// answers as the SDK does: a call whose context has ended fails with
// that context's error (wrapped as the SDK wraps it), any other gets a
// table keyed by reference. GetItem finds nothing.
type cancelAwareDescribe struct {
	dynamostore.Client
	mu    sync.Mutex
	calls int
}

func (c *cancelAwareDescribe) DescribeTable(ctx context.Context, _ *dynamodb.DescribeTableInput, _ ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	c.mu.Lock()
	c.calls++
	first := c.calls == 1
	c.mu.Unlock()
	switch {
	case first:
		return nil, &smithy.GenericAPIError{Code: "ThrottlingException", Message: "rate exceeded"}
	case ctx.Err() != nil:
		return nil, &smithy.OperationError{ServiceID: "DynamoDB", OperationName: "DescribeTable", Err: &smithy.CanceledError{Err: ctx.Err()}}
	}
	return &dynamodb.DescribeTableOutput{Table: &types.TableDescription{KeySchema: byRefKeys}}, nil
}

func (c *cancelAwareDescribe) GetItem(ctx context.Context, _ *dynamodb.GetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return &dynamodb.GetItemOutput{}, nil
}

// TestAttackDeferredCheckCallerCancelled states: a caller that gives up
// (its context cancelled) while the store's deferred key-schema check
// runs decides nothing for the store. Its own call fails, never as the
// table's refusal (ErrInvalidOptions), and the next call with a live
// context runs the check again and gets its answer: the store does not
// stay refused until the next cold start because one client hung up.
func TestAttackDeferredCheckCallerCancelled(t *testing.T) {
	c := &cancelAwareDescribe{}
	s, err := dynamostore.New(c, dynamostore.Options{Table: "t", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("New during a blip = %v, want accepted", err)
	}
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Get(gone, "k", base); err == nil || errors.Is(err, dynamostore.ErrInvalidOptions) {
		t.Errorf("Get with a cancelled context = %v, want a failure that is not the table's refusal", err)
	}
	if _, err := s.Get(context.Background(), "k", base); !errors.Is(err, dedupe.ErrNotFound) {
		t.Fatalf("Get after the cancelled one = %v, want ErrNotFound (the check runs again and passes)", err)
	}
	if got := s.KeySchema(); got != dynamostore.KeySchemaByRef {
		t.Errorf("KeySchema() = %v, want KeySchemaByRef", got)
	}
}
