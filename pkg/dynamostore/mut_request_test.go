package dynamostore_test

import (
	"context"
	"crypto/rand"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/lambda-dedupe/dedupe/pkg/dynamostore"
)

// TestEveryClaimWriteFilesTheRecord: whichever write takes a key (the
// claim's update of an absent key, the PutItem of a new life over an
// expired record, the fenced PutItem that takes over a record written
// before first_token existed), the record is in the in-flight index
// exactly when the store is not Lean (Options.Lean: no claim writes an
// index entry), under the key's shard, and a key longer than
// MaxPlainSortKey reads back in full.
func TestEveryClaimWriteFilesTheRecord(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	stranded := base.Add(2 * time.Minute) // past the first claim's lease
	expired := base.Add(2 * time.Hour)    // past its expiry
	paths := []struct {
		name  string
		setup func(t *testing.T, s *dynamostore.Store, key string)
		now   time.Time
	}{
		{"fresh key", func(*testing.T, *dynamostore.Store, string) {}, base},
		{"new life over an expired record", func(t *testing.T, s *dynamostore.Store, key string) {
			if res, err := s.Claim(ctx, lifeClaim(key, "tok-a", base)); err != nil || !res.Acquired {
				t.Fatalf("first claim: %+v, %v", res, err)
			}
		}, expired},
		{"takeover of a record without first_token", func(t *testing.T, s *dynamostore.Store, key string) {
			if res, err := s.Claim(ctx, lifeClaim(key, "tok-a", base)); err != nil || !res.Acquired {
				t.Fatalf("first claim: %+v, %v", res, err)
			}
			if _, err := r.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
				TableName: aws.String(r.table), Key: r.key(key), UpdateExpression: aws.String("REMOVE first_token"),
			}); err != nil {
				t.Fatal(err)
			}
		}, stranded},
	}
	for _, lean := range []bool{false, true} {
		s := r.store(t, dynamostore.Options{Lean: lean})
		for _, p := range paths {
			for _, n := range []int{40, dynamostore.MaxPlainSortKey + 80} {
				key := "files/" + rand.Text() + "/"
				key += strings.Repeat("k", n-len(key))
				p.setup(t, s, key)
				res, err := s.Claim(ctx, lifeClaim(key, "tok-b", p.now))
				if err != nil || !res.Acquired || res.Record.Key != key {
					t.Fatalf("lean %v, %s, %d-byte key: claim = %+v, %v; want acquired", lean, p.name, n, res.Acquired, err)
				}
				item := r.rawItem(t, key)
				shard, inIndex := item["inflight_shard"].(*types.AttributeValueMemberN)
				if inIndex == lean {
					t.Errorf("lean %v, %s, %d-byte key: in the in-flight index %v, want %v", lean, p.name, n, inIndex, !lean)
				}
				if want := s.Shard(key); inIndex && shard.Value != strconv.Itoa(want) {
					t.Errorf("lean %v, %s: filed in shard %s, want %d", lean, p.name, shard.Value, want)
				}
				if rec, err := s.Get(ctx, key, p.now); err != nil || rec.Key != key || rec.Token != "tok-b" {
					t.Errorf("lean %v, %s, %d-byte key: Get = key kept %v, owner %q, %v; want the full key, owned by tok-b", lean, p.name, n, rec.Key == key, rec.Token, err)
				}
			}
		}
	}
}

// ttlClient is a TableClient whose table is ACTIVE at once and whose
// UpdateTimeToLive answers err.
type ttlClient struct{ err error }

func (ttlClient) CreateTable(context.Context, *dynamodb.CreateTableInput, ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error) {
	return &dynamodb.CreateTableOutput{}, nil
}

func (ttlClient) DescribeTable(context.Context, *dynamodb.DescribeTableInput, ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	return &dynamodb.DescribeTableOutput{Table: &types.TableDescription{TableStatus: types.TableStatusActive}}, nil
}

func (c ttlClient) UpdateTimeToLive(context.Context, *dynamodb.UpdateTimeToLiveInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error) {
	return &dynamodb.UpdateTimeToLiveOutput{}, c.err
}

// TestCreateTableWithoutTTL: CreateTable accepts a server that has no
// TTL (UnknownOperationException, NotImplemented: stores never rely on
// TTL deletion), and reports every other failure to enable it.
func TestCreateTableWithoutTTL(t *testing.T) {
	tests := []struct {
		name string
		err  error
		ok   bool
	}{
		{"enabled", nil, true},
		{"UnknownOperationException", &smithy.GenericAPIError{Code: "UnknownOperationException"}, true},
		{"NotImplemented", &smithy.GenericAPIError{Code: "NotImplemented"}, true},
		{"AccessDeniedException", &smithy.GenericAPIError{Code: "AccessDeniedException"}, false},
		{"network", errors.New("connection reset"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := dynamostore.CreateTable(t.Context(), ttlClient{tt.err}, "t")
			if (err == nil) != tt.ok {
				t.Errorf("got %v, want ok %v", err, tt.ok)
			}
		})
	}
}
