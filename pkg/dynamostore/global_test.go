package dynamostore_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/dynamostore"
)

// describeStub answers DescribeTable with table (or err) and counts calls;
// every other call goes to Client (nil: it must not be called).
type describeStub struct {
	dynamostore.Client
	table *types.TableDescription
	err   error
	mu    sync.Mutex
	calls int
}

func (d *describeStub) DescribeTable(context.Context, *dynamodb.DescribeTableInput, ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	d.mu.Lock()
	d.calls++
	d.mu.Unlock()
	if d.err != nil {
		return nil, d.err
	}
	table := d.table
	if table != nil && table.KeySchema == nil {
		// The global-table tests judge replicas: a table keyed by
		// reference, the default schema.
		c := *table
		c.KeySchema = byRefKeys
		table = &c
	}
	return &dynamodb.DescribeTableOutput{Table: table}, nil
}

// byRefKeys is the key schema of a table keyed by reference (TableInput).
var byRefKeys = dynamostore.TableInput("t").KeySchema

func replicas(regions ...string) []types.ReplicaDescription {
	var out []types.ReplicaDescription
	for _, r := range regions {
		out = append(out, types.ReplicaDescription{RegionName: aws.String(r), ReplicaStatus: types.ReplicaStatusActive})
	}
	return out
}

func TestGlobalTablesCheck(t *testing.T) {
	tests := []struct {
		name      string
		table     *types.TableDescription
		err       error
		mode      dynamostore.GlobalTables
		wantErr   error // nil: accepted
		wantWarn  bool
		wantCalls int
	}{
		{"single Region", &types.TableDescription{TableName: aws.String("t")}, nil, dynamostore.GlobalTablesRefuseEventual, nil, false, 1},
		{"MREC replicas refused", &types.TableDescription{Replicas: replicas("eu-west-1"), GlobalTableVersion: aws.String("2019.11.21"),
			MultiRegionConsistency: types.MultiRegionConsistencyEventual}, nil, dynamostore.GlobalTablesRefuseEventual, dynamostore.ErrInvalidOptions, false, 1},
		{"replicas without the consistency field refused", &types.TableDescription{Replicas: replicas("eu-west-1")}, nil,
			dynamostore.GlobalTablesRefuseEventual, dynamostore.ErrInvalidOptions, false, 1},
		{"2017 global table refused", &types.TableDescription{GlobalTableVersion: aws.String("2017.11.29")}, nil,
			dynamostore.GlobalTablesRefuseEventual, dynamostore.ErrInvalidOptions, false, 1},
		{"MREC replicas warned", &types.TableDescription{Replicas: replicas("eu-west-1", "ap-south-1"),
			MultiRegionConsistency: types.MultiRegionConsistencyEventual}, nil, dynamostore.GlobalTablesWarnEventual, nil, true, 1},
		{"MRSC replicas", &types.TableDescription{Replicas: replicas("us-east-2", "us-west-2"),
			MultiRegionConsistency: types.MultiRegionConsistencyStrong}, nil, dynamostore.GlobalTablesRefuseEventual, nil, false, 1},
		{"MRSC with a witness", &types.TableDescription{Replicas: replicas("us-east-2"),
			GlobalTableWitnesses:   []types.GlobalTableWitnessDescription{{RegionName: aws.String("us-west-2")}},
			MultiRegionConsistency: types.MultiRegionConsistencyStrong}, nil, dynamostore.GlobalTablesRefuseEventual, nil, false, 1},
		{"witness without strong consistency", &types.TableDescription{
			GlobalTableWitnesses: []types.GlobalTableWitnessDescription{{RegionName: aws.String("us-west-2")}}}, nil,
			dynamostore.GlobalTablesRefuseEventual, dynamostore.ErrInvalidOptions, false, 1},
		{"unchecked makes no call", &types.TableDescription{Replicas: replicas("eu-west-1")}, nil, dynamostore.GlobalTablesUnchecked, nil, false, 0},
		{"access denied is loud", nil, &smithy.GenericAPIError{Code: "AccessDeniedException", Message: "no dynamodb:DescribeTable"},
			dynamostore.GlobalTablesRefuseEventual, nil, false, 1},
		{"throttled is deferred, not refused", nil, &smithy.GenericAPIError{Code: "ThrottlingException"},
			dynamostore.GlobalTablesRefuseEventual, nil, false, 1},
		{"unknown mode", &types.TableDescription{}, nil, dynamostore.GlobalTables(7), dynamostore.ErrInvalidOptions, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stub := &describeStub{table: tt.table, err: tt.err}
			var logs bytes.Buffer
			opts := dynamostore.Options{Table: "t", GlobalTables: tt.mode, Logger: slog.New(slog.NewTextHandler(&logs, nil))}
			if tt.mode == dynamostore.GlobalTablesUnchecked {
				opts.KeySchema = dynamostore.KeySchemaByRef
			}
			_, err := dynamostore.New(stub, opts)
			switch {
			case tt.err != nil && tt.wantErr == nil && strings.Contains(tt.name, "deferred"):
				if err != nil || !strings.Contains(logs.String(), "failed transiently") {
					t.Errorf("New = %v, log %q; want accepted, with a warning", err, logs.String())
				}
			case tt.err != nil && tt.wantErr == nil:
				// Any DescribeTable failure refuses construction and names the fix.
				if err == nil || !strings.Contains(err.Error(), "GlobalTablesUnchecked") || !strings.Contains(err.Error(), "DescribeTable") {
					t.Errorf("New = %v, want a refusal naming DescribeTable and GlobalTablesUnchecked", err)
				}
			case tt.wantErr == nil && err != nil:
				t.Errorf("New = %v, want accepted", err)
			case tt.wantErr != nil && !errors.Is(err, tt.wantErr):
				t.Errorf("New = %v, want %v", err, tt.wantErr)
			}
			if errors.Is(tt.wantErr, dynamostore.ErrInvalidOptions) && tt.mode == dynamostore.GlobalTablesRefuseEventual && !strings.Contains(err.Error(), "GlobalTablesWarnEventual") {
				t.Errorf("refusal %q does not name the option", err)
			}
			if got := strings.Contains(logs.String(), "eventual consistency"); got != tt.wantWarn {
				t.Errorf("warning logged %v, want %v (%q)", got, tt.wantWarn, logs.String())
			}
			if stub.calls != tt.wantCalls {
				t.Errorf("DescribeTable called %d times, want %d", stub.calls, tt.wantCalls)
			}
		})
	}
}

// TestGlobalTablesCheckOnServer runs the check against the test server:
// a table without replicas passes, with one DescribeTable, whose latency
// is logged (the check's cold-start cost).
func TestGlobalTablesCheckOnServer(t *testing.T) {
	r := newRig(t)
	r.calls.reset()
	start := time.Now()
	if _, err := dynamostore.New(r.client, dynamostore.Options{Table: r.table}); err != nil {
		t.Fatalf("New on a single-Region table: %v", err)
	}
	t.Logf("New with the check: %v", time.Since(start))
	if ops, _ := r.calls.snapshot(); len(ops) != 1 || ops[0] != "DescribeTable" {
		t.Errorf("calls = %v, want one DescribeTable", ops)
	}
	if _, err := dynamostore.New(r.client, dynamostore.Options{Table: "no-such-table-" + r.table}); err == nil {
		t.Error("New on a missing table: got nil, want an error")
	}
}

// conflictStub fails the first n writes with ReplicatedWriteConflictException.
type conflictStub struct {
	dynamostore.Client
	mu     sync.Mutex
	n      int
	writes int
}

func (c *conflictStub) conflict() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writes++
	if c.writes <= c.n {
		return &types.ReplicatedWriteConflictException{Message: aws.String("being written in another Region")}
	}
	return nil
}

func (c *conflictStub) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	if err := c.conflict(); err != nil {
		return nil, err
	}
	return c.Client.PutItem(ctx, in, o...)
}

func (c *conflictStub) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if err := c.conflict(); err != nil {
		return nil, err
	}
	return c.Client.UpdateItem(ctx, in, o...)
}

func TestReplicatedWriteConflict(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	tests := []struct {
		name         string
		conflicts    int
		wantInFlight bool
	}{
		{"none", 0, false},
		{"retried", dynamostore.ConflictAttempts - 1, false},
		// Twice the attempts: a store that retried past ConflictAttempts
		// would acquire the key, and fail here, instead of waiting ever
		// longer between attempts.
		{"persistent", 2 * dynamostore.ConflictAttempts, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stub := &conflictStub{Client: r.client, n: tt.conflicts}
			s, err := dynamostore.New(stub, dynamostore.Options{Table: r.table})
			if err != nil {
				t.Fatal(err)
			}
			key := "rwc-" + tt.name
			_, err = s.Claim(ctx, dedupe.ClaimRequest{Key: key, Fingerprint: "fp", Token: "A", Now: base,
				LeaseUntil: base.Add(time.Minute), ExpiresAt: base.Add(time.Hour)})
			// Issue 29, item 3: another Region writing that very item is
			// evidence of a concurrent writer, an answer: in flight, never
			// unavailable (on which FailOpen would run the work).
			if got := errors.Is(err, dedupe.ErrInProgress); got != tt.wantInFlight || errors.Is(err, dedupe.ErrStoreUnavailable) {
				t.Fatalf("Claim = %v, want in flight %v, never unavailable", err, tt.wantInFlight)
			}
			if tt.wantInFlight {
				if stub.writes != dynamostore.ConflictAttempts {
					t.Errorf("writes = %d, want %d attempts", stub.writes, dynamostore.ConflictAttempts)
				}
				return
			}
			err = s.Complete(ctx, dedupe.CompleteRequest{Key: key, Token: "A", Now: base, ExpiresAt: base.Add(time.Hour),
				Result: dedupe.Result{StatusCode: 200, Body: []byte("ok")}})
			if err != nil {
				t.Errorf("Complete = %v, want nil", err)
			}
		})
	}
}

// TestReplicatedWriteConflictThroughTheGuard: a duplicate whose claim keeps
// meeting ReplicatedWriteConflictException never runs, FailOpen or not,
// and the adapter answers 409 with Retry-After. A conflict followed by a
// throttle is still a conflict seen.
func TestReplicatedWriteConflictThroughTheGuard(t *testing.T) {
	r := newRig(t)
	for _, tt := range []struct {
		name string
		stub func(c dynamostore.Client) dynamostore.Client
	}{
		// Every attempt the store makes (twice as many conflicts: one
		// that retried without bound would acquire the key and run).
		{"every attempt conflicts", func(c dynamostore.Client) dynamostore.Client {
			return &conflictStub{Client: c, n: 2 * dynamostore.ConflictAttempts}
		}},
		{"a conflict, then a throttle", func(c dynamostore.Client) dynamostore.Client {
			n := 0
			return faultClient{Client: c, fail: func(op string) error {
				if op != "UpdateItem" { // the claim
					return nil
				}
				if n++; n == 1 {
					return &types.ReplicatedWriteConflictException{Message: aws.String("being written in another Region")}
				}
				return &smithy.GenericAPIError{Code: "ThrottlingException", Message: "rate exceeded"}
			}}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, err := dynamostore.New(tt.stub(r.client), dynamostore.Options{Table: r.table})
			if err != nil {
				t.Fatal(err)
			}
			g := dedupe.New(s, &dedupe.Config{Prefix: "rwc", FailOpen: true, Now: (&clock{now: base}).Now, Logger: slog.New(slog.DiscardHandler)})
			runs := 0
			h := dedupe.HTTPAPI(g, &dedupe.HTTPConfig{SharedScope: true, Logger: slog.New(slog.DiscardHandler)},
				func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
					runs++
					return events.APIGatewayV2HTTPResponse{StatusCode: 201}, nil
				})
			resp, err := h(context.Background(), events.APIGatewayV2HTTPRequest{RouteKey: "POST /pay", RawPath: "/pay",
				Headers: map[string]string{"idempotency-key": "rwc-" + rand.Text()}, Body: "{}",
				RequestContext: events.APIGatewayV2HTTPRequestContext{HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "POST", Path: "/pay"}}})
			if err != nil || resp.StatusCode != 409 || resp.Headers["Retry-After"] == "" || runs != 0 {
				t.Errorf("HTTPAPI = %d (Retry-After %q), %v after %d runs; want 409 with Retry-After, no run", resp.StatusCode, resp.Headers["Retry-After"], err, runs)
			}
		})
	}
}

// TestGlobalTablesCheckDeferred (issue 32, item 1): a DynamoDB blip during
// a cold start does not fail New; the store's calls answer unavailable
// (503) until the check succeeds, then work. A table then found in
// eventual consistency is refused on every call, for good.
func TestGlobalTablesCheckDeferred(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	throttled := &smithy.GenericAPIError{Code: "ThrottlingException", Message: "rate exceeded"}
	claim := func(s *dynamostore.Store, key string) error {
		_, err := s.Claim(ctx, dedupe.ClaimRequest{Key: key, Fingerprint: "fp", Token: "A", Now: base,
			LeaseUntil: base.Add(time.Minute), ExpiresAt: base.Add(time.Hour)})
		return err
	}
	t.Run("blip, then a single-Region table", func(t *testing.T) {
		stub := &describeStub{Client: r.client, table: &types.TableDescription{TableName: aws.String(r.table)}, err: throttled}
		s, err := dynamostore.New(stub, dynamostore.Options{Table: r.table, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatalf("New during a blip = %v, want accepted", err)
		}
		key := "deferred-" + rand.Text()
		if err := claim(s, key); !errors.Is(err, dedupe.ErrStoreUnavailable) {
			t.Fatalf("Claim during the blip = %v, want ErrStoreUnavailable", err)
		}
		if _, err := s.Get(ctx, key, base); !errors.Is(err, dedupe.ErrStoreUnavailable) {
			t.Errorf("Get during the blip = %v, want ErrStoreUnavailable", err)
		}
		stub.mu.Lock()
		stub.err = nil
		stub.mu.Unlock()
		if err := claim(s, key); err != nil {
			t.Fatalf("Claim after the blip = %v", err)
		}
		calls := stub.calls
		if err := claim(s, key+"/2"); err != nil || stub.calls != calls {
			t.Errorf("Claim after the check passed = %v, DescribeTable calls %d -> %d; want no more checks", err, calls, stub.calls)
		}
	})
	t.Run("blip, then eventual consistency", func(t *testing.T) {
		stub := &describeStub{Client: r.client, err: throttled, table: &types.TableDescription{Replicas: replicas("eu-west-1"),
			MultiRegionConsistency: types.MultiRegionConsistencyEventual}}
		s, err := dynamostore.New(stub, dynamostore.Options{Table: r.table, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatalf("New during a blip = %v, want accepted", err)
		}
		stub.mu.Lock()
		stub.err = nil
		stub.mu.Unlock()
		for range 2 {
			if err := claim(s, "mrec-"+rand.Text()); !errors.Is(err, dynamostore.ErrInvalidOptions) || errors.Is(err, dedupe.ErrStoreUnavailable) {
				t.Errorf("Claim on an MREC table = %v, want the refusal (ErrInvalidOptions)", err)
			}
		}
		if stub.calls != 2 {
			t.Errorf("DescribeTable calls = %d, want 2 (New, then the first call; the refusal is kept)", stub.calls)
		}
	})
	t.Run("access denied still refuses New", func(t *testing.T) {
		stub := &describeStub{Client: r.client, err: &smithy.GenericAPIError{Code: "AccessDeniedException", Message: "no dynamodb:DescribeTable"}}
		if _, err := dynamostore.New(stub, dynamostore.Options{Table: r.table}); err == nil || errors.Is(err, dedupe.ErrStoreUnavailable) {
			t.Errorf("New = %v, want a permanent refusal", err)
		}
	})
}
