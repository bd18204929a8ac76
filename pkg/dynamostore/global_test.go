package dynamostore_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

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
	return &dynamodb.DescribeTableOutput{Table: d.table}, nil
}

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
		{"throttled is unavailable", nil, &smithy.GenericAPIError{Code: "ThrottlingException"},
			dynamostore.GlobalTablesRefuseEventual, dedupe.ErrStoreUnavailable, false, 1},
		{"unknown mode", &types.TableDescription{}, nil, dynamostore.GlobalTables(7), dynamostore.ErrInvalidOptions, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stub := &describeStub{table: tt.table, err: tt.err}
			var logs bytes.Buffer
			_, err := dynamostore.New(stub, dynamostore.Options{Table: "t", GlobalTables: tt.mode,
				Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			switch {
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
		name            string
		conflicts       int
		wantUnavailable bool
	}{
		{"none", 0, false},
		{"retried", dynamostore.ConflictAttempts - 1, false},
		{"persistent", 1000, true},
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
			if got := errors.Is(err, dedupe.ErrStoreUnavailable); got != tt.wantUnavailable {
				t.Fatalf("Claim = %v, want unavailable %v", err, tt.wantUnavailable)
			}
			if tt.wantUnavailable {
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
