package dynamostore_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/dynamostore"
)

// TestGlobalTablesRefusalSaysWhy: New's refusal of a global table in
// eventual consistency tells the operator what DynamoDB said about it, so
// that they can tell which setting to change: the replicas' Regions and
// the table's MultiRegionConsistency, and, when DescribeTable gave none
// (replicas created before the field existed), that none was given and
// that this means EVENTUAL, which a table that states EVENTUAL is never
// said to lack.
func TestGlobalTablesRefusalSaysWhy(t *testing.T) {
	for _, tt := range []struct {
		name     string
		table    *types.TableDescription
		want     []string
		wantNone []string
	}{
		{"EVENTUAL stated", &types.TableDescription{Replicas: replicas("eu-west-1", "ap-south-1"),
			MultiRegionConsistency: types.MultiRegionConsistencyEventual},
			[]string{"replicas [eu-west-1 ap-south-1], EVENTUAL"}, []string{"no MultiRegionConsistency"}},
		{"no MultiRegionConsistency", &types.TableDescription{Replicas: replicas("eu-west-1")},
			[]string{"replicas [eu-west-1], no MultiRegionConsistency, so EVENTUAL"}, nil},
		{"2017 global tables", &types.TableDescription{GlobalTableVersion: aws.String("2017.11.29"), Replicas: replicas("eu-west-1"),
			MultiRegionConsistency: types.MultiRegionConsistencyStrong},
			[]string{"global tables version 2017.11.29"}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := dynamostore.New(&describeStub{table: tt.table}, dynamostore.Options{Table: "t"})
			if !errors.Is(err, dynamostore.ErrInvalidOptions) {
				t.Fatalf("New = %v, want ErrInvalidOptions", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("refusal %q does not say %q", err, w)
				}
			}
			for _, w := range tt.wantNone {
				if strings.Contains(err.Error(), w) {
					t.Errorf("refusal %q says %q", err, w)
				}
			}
		})
	}
}

// conflictAlways answers every write with ReplicatedWriteConflictException
// (another Region keeps writing the item) and notes when each came, by the
// clock of the test's bubble. It makes no other call. A store that writes
// more than twice ConflictAttempts times is stopped (cancel), so that it
// fails the test instead of retrying forever.
type conflictAlways struct {
	dynamostore.Client
	mu sync.Mutex
	at []time.Time
	// cancelAfter > 0 makes the write of that attempt call cancel before
	// it answers.
	cancelAfter int
	cancel      func()
}

func (c *conflictAlways) conflict() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.at = append(c.at, time.Now())
	if len(c.at) == c.cancelAfter || len(c.at) > 2*dynamostore.ConflictAttempts {
		c.cancel()
	}
	return &types.ReplicatedWriteConflictException{Message: aws.String("being written in another Region")}
}

func (c *conflictAlways) UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return nil, c.conflict()
}

func (c *conflictAlways) PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return nil, c.conflict()
}

// TestConflictRetriesBackOff: a write that meets
// ReplicatedWriteConflictException is sent again ConflictAttempts times in
// all, after waits that double from a first one that is not zero, so that
// the store backs off from the Region writing the item instead of
// hammering it; and once the call's context ends, nothing more is sent.
// Either way the claim reports a concurrent writer (ErrInProgress).
func TestConflictRetriesBackOff(t *testing.T) {
	for _, tt := range []struct {
		name   string
		cancel int // the context ends as this attempt is answered; 0: never
		writes int
	}{
		{"every attempt", 0, dynamostore.ConflictAttempts},
		{"context ends at the second attempt", 2, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := &conflictAlways{}
				s, err := dynamostore.New(c, dynamostore.Options{Table: "t", GlobalTables: dynamostore.GlobalTablesUnchecked,
					KeySchema: dynamostore.KeySchemaByRef})
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				c.cancelAfter, c.cancel = tt.cancel, cancel
				now := time.Now()
				_, err = s.Claim(ctx, dedupe.ClaimRequest{Key: "rwc/backoff", Fingerprint: "fp", Token: "A", Now: now,
					LeaseUntil: now.Add(time.Minute), ExpiresAt: now.Add(time.Hour)})
				if !errors.Is(err, dedupe.ErrInProgress) || errors.Is(err, dedupe.ErrStoreUnavailable) {
					t.Errorf("Claim = %v, want ErrInProgress, never unavailable", err)
				}
				c.mu.Lock()
				defer c.mu.Unlock()
				if len(c.at) != tt.writes {
					t.Fatalf("got %d writes, want %d", len(c.at), tt.writes)
				}
				var gaps []time.Duration
				for i := 1; i < len(c.at); i++ {
					gaps = append(gaps, c.at[i].Sub(c.at[i-1]))
				}
				for i, g := range gaps {
					if (i == 0 && g <= 0) || (i > 0 && g != 2*gaps[i-1]) {
						t.Errorf("waits between attempts %v: want a first one above zero, each next one twice the last", gaps)
						break
					}
				}
			})
		})
	}
}
