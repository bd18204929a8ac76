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

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
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

// racer passes calls through to Client, but runs races[i] before the
// i-th fenced PutItem of a takeover (the one conditioned on the owner
// seen), as another writer of the key would.
type racer struct {
	dynamostore.Client
	races []func()
	n     int
}

func (c *racer) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	if strings.Contains(aws.ToString(in.ConditionExpression), ":owner") && c.n < len(c.races) {
		c.n++
		c.races[c.n-1]()
	}
	return c.Client.PutItem(ctx, in, o...)
}

// TestClaimLosingEveryRace: a claim whose fenced takeovers all lose to
// racing writers is not acquired, and never answers with a record that
// is free for it: it returns the record it last saw when that one is
// held by another (the caller's conflict), and a zero Record (the caller
// claims again) when the record is still free for it.
func TestClaimLosingEveryRace(t *testing.T) {
	r := newRig(t)
	plain := r.store(t, dynamostore.Options{})
	ctx := context.Background()
	stranded := base.Add(2 * time.Minute)
	claim := func(t *testing.T, k, tok string, release bool) func() {
		return func() {
			if res, err := plain.Claim(ctx, lifeClaim(k, tok, stranded)); err != nil || !res.Acquired {
				t.Errorf("racing claim by %s: %+v, %v", tok, res, err)
			}
			if release {
				if err := plain.Release(ctx, k, tok); err != nil {
					t.Errorf("racing release by %s: %v", tok, err)
				}
			}
		}
	}
	for _, lastHeld := range []bool{false, true} {
		k := rand.Text()
		if res, err := plain.Claim(ctx, lifeClaim(k, "tok-a", base)); err != nil || !res.Acquired {
			t.Fatal(res, err)
		}
		// A record from before first_token: the claim takes it over with
		// a fenced PutItem, which each race makes fail.
		if _, err := r.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(r.table),
			Key: r.key(k), UpdateExpression: aws.String("REMOVE first_token")}); err != nil {
			t.Fatal(err)
		}
		c := &racer{Client: r.client, races: []func(){claim(t, k, "tok-c", true), claim(t, k, "tok-d", !lastHeld)}}
		s, err := dynamostore.New(c, dynamostore.Options{Table: r.table})
		if err != nil {
			t.Fatal(err)
		}
		res, err := s.Claim(ctx, lifeClaim(k, "tok-b", stranded))
		if err != nil || res.Acquired || c.n != len(c.races) {
			t.Fatalf("last racer holds %v: claim = %+v, %v after %d races; want not acquired after %d", lastHeld, res, err, c.n, len(c.races))
		}
		if lastHeld && (res.Record.Token != "tok-d" || res.Record.Status != dedupe.StatusInProgress) {
			t.Errorf("last racer holds the key: claim returned %+v, want tok-d's record", res.Record)
		}
		if !lastHeld && res.Record != (dedupe.Record{}) {
			t.Errorf("the key is free again: claim returned %+v, want a zero Record", res.Record)
		}
	}
}

// TestKeySchemaRefusalNamesTheFix: when New refuses a table's key schema
// because of an option, the refusal says which option to change: a
// SortKey on a table keyed by reference is unset, a stated KeySchema that
// the table contradicts is set to what the table is.
func TestKeySchemaRefusalNamesTheFix(t *testing.T) {
	sk := dynamostore.SortKey{Name: "sk", Value: "v"}
	tests := []struct {
		name string
		keys []types.KeySchemaElement
		opts dynamostore.Options
		fix  string
	}{
		{"sort key on a table keyed by reference", keys("ref", "HASH", "pk", "RANGE"), dynamostore.Options{SortKey: sk}, "unset SortKey"},
		{"classic stated, keyed by reference found", keys("ref", "HASH", "pk", "RANGE"), dynamostore.Options{KeySchema: dynamostore.KeySchemaClassic}, "set KeySchema to KeySchemaByRef"},
		{"keyed by reference stated, classic found", keys("pk", "HASH"), dynamostore.Options{KeySchema: dynamostore.KeySchemaByRef}, "set KeySchema to KeySchemaClassic"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := tt.opts
			opts.Table = "t"
			_, err := dynamostore.New(&describeStub{table: &types.TableDescription{TableName: aws.String("t"), KeySchema: tt.keys}}, opts)
			if !errors.Is(err, dynamostore.ErrInvalidOptions) || !strings.Contains(err.Error(), tt.fix) {
				t.Errorf("New = %v, want ErrInvalidOptions saying %q", err, tt.fix)
			}
		})
	}
}
