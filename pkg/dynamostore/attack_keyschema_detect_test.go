package dynamostore_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/lambda-dedupe/dedupe/localtest/dynamotest"
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

// defs returns attribute definitions from name, type pairs.
func defs(pairs ...string) []types.AttributeDefinition {
	var out []types.AttributeDefinition
	for i := 0; i < len(pairs); i += 2 {
		out = append(out, types.AttributeDefinition{AttributeName: aws.String(pairs[i]), AttributeType: types.ScalarAttributeType(pairs[i+1])})
	}
	return out
}

// TestAttackKeyAttributeTypes states: the store writes every key
// attribute as a string (S), so a table that defines one otherwise (pk
// as a number, ref as binary, the fixed sort key of a single-table
// design as a number), on which DynamoDB would refuse every call, is
// refused at New (ErrInvalidOptions) naming the attribute, its type and
// the fix, as a table keyed by other names is. A description that
// defines no attributes (a stand-in) is judged by the key names alone.
func TestAttackKeyAttributeTypes(t *testing.T) {
	sk := dynamostore.SortKey{Name: "sk", Value: "IDEMPOTENCY"}
	tests := []struct {
		name   string
		keys   []types.KeySchemaElement
		defs   []types.AttributeDefinition
		opts   dynamostore.Options
		refuse string // "": accepted; else the attribute the refusal names
	}{
		{"by ref, strings", keys("ref", "HASH", "pk", "RANGE"), defs("ref", "S", "pk", "S", "inflight_shard", "N"), dynamostore.Options{}, ""},
		{"by ref, pk a number", keys("ref", "HASH", "pk", "RANGE"), defs("ref", "S", "pk", "N"), dynamostore.Options{}, "pk"},
		{"by ref, ref binary", keys("ref", "HASH", "pk", "RANGE"), defs("ref", "B", "pk", "S"), dynamostore.Options{}, "ref"},
		{"by ref stated, pk a number", keys("ref", "HASH", "pk", "RANGE"), defs("ref", "S", "pk", "N"), dynamostore.Options{KeySchema: dynamostore.KeySchemaByRef}, "pk"},
		{"classic, pk a number", keys("pk", "HASH"), defs("pk", "N"), dynamostore.Options{}, "pk"},
		{"classic, sort key a number", keys("pk", "HASH", "sk", "RANGE"), defs("pk", "S", "sk", "N"), dynamostore.Options{SortKey: sk}, "sk"},
		{"classic, sort key a string", keys("pk", "HASH", "sk", "RANGE"), defs("pk", "S", "sk", "S"), dynamostore.Options{SortKey: sk}, ""},
		{"no definitions (a stand-in)", keys("ref", "HASH", "pk", "RANGE"), nil, dynamostore.Options{}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := tt.opts
			opts.Table = "t"
			_, err := dynamostore.New(&describeStub{table: &types.TableDescription{KeySchema: tt.keys, AttributeDefinitions: tt.defs}}, opts)
			if tt.refuse == "" {
				if err != nil {
					t.Errorf("New = %v, want accepted", err)
				}
				return
			}
			if !errors.Is(err, dynamostore.ErrInvalidOptions) || errors.Is(err, dedupe.ErrStoreUnavailable) {
				t.Fatalf("New = %v, want ErrInvalidOptions", err)
			}
			for _, n := range []string{fmt.Sprintf("%q", tt.refuse), "(S)", "TableInput"} {
				if !strings.Contains(err.Error(), n) {
					t.Errorf("refusal %q does not name %s", err, n)
				}
			}
		})
	}
}

// TestAttackKeyAttributeTypesOnServer: on a server, a table keyed by
// reference whose pk is a number refuses the store's every call
// (DynamoDB, dynalite and moto check key types), and New refuses the
// table before any of them.
func TestAttackKeyAttributeTypesOnServer(t *testing.T) {
	c := testClient(t)
	name := dynamotest.UniqueName("numpk")
	ctx := context.Background()
	in := dynamostore.TableInput(name)
	for i, d := range in.AttributeDefinitions {
		if aws.ToString(d.AttributeName) == "pk" {
			in.AttributeDefinitions[i].AttributeType = types.ScalarAttributeTypeN
		}
	}
	if _, err := c.CreateTable(ctx, in); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = c.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(name)})
	})
	w := dynamodb.NewTableExistsWaiter(c, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay, o.MaxDelay = 10*time.Millisecond, 200*time.Millisecond
	})
	if err := w.Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)}, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := dynamostore.New(c, dynamostore.Options{Table: name}); !errors.Is(err, dynamostore.ErrInvalidOptions) || !strings.Contains(err.Error(), `"pk"`) {
		t.Errorf("New on a table whose pk is a number = %v, want ErrInvalidOptions naming pk", err)
	}
	// What the refusal spares: a store told the schema meets a
	// ValidationException on every call.
	s, err := dynamostore.New(c, dynamostore.Options{Table: name, GlobalTables: dynamostore.GlobalTablesUnchecked, KeySchema: dynamostore.KeySchemaByRef})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Claim(ctx, dedupe.ClaimRequest{Key: "k", Fingerprint: "f", Token: "t", Now: base, LeaseUntil: base.Add(time.Minute), ExpiresAt: base.Add(time.Hour)})
	var apiErr smithy.APIError
	if !errors.As(err, &apiErr) || apiErr.ErrorCode() != "ValidationException" || errors.Is(err, dedupe.ErrStoreUnavailable) {
		t.Errorf("Claim on a table whose pk is a number = %v, want a ValidationException", err)
	}
}
