package ensuretest_test

import (
	"context"
	"errors"
	"reflect"
	"sort"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambda-dedupe/dedupe/infra"
	"github.com/lambda-dedupe/dedupe/localtest/dynamotest"
)

// uniqueTables loads template.yaml with table names unique to this test,
// and deletes the tables when the test ends.
func uniqueTables(t *testing.T, client *dynamodb.Client) []infra.Table {
	t.Helper()
	names := map[string]string{
		"IdempotencyTable": dynamotest.UniqueName("infra-idem"),
		"PaymentsTable":    dynamotest.UniqueName("infra-pay"),
	}
	tables, err := infra.Tables(load(t, &infra.Options{Names: names}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, n := range names {
			_, _ = client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(n)})
		}
	})
	return tables
}

func TestEnsureTablesDynalite(t *testing.T) {
	ctx := t.Context()
	client := dynamotest.Client(t)
	tables := uniqueTables(t, client)
	idem := aws.ToString(tables[0].Input.TableName) // sorted: IdempotencyTable first

	for run, wantCreated := range []bool{true, false} {
		results, err := infra.EnsureTables(ctx, client, tables)
		if err != nil {
			t.Fatalf("run %d: %v", run+1, err)
		}
		if len(results) != len(tables) {
			t.Fatalf("run %d: got %d results, want %d", run+1, len(results), len(tables))
		}
		for _, r := range results {
			if r.Created != wantCreated {
				t.Errorf("run %d, %s: created got %v, want %v", run+1, r.TableName, r.Created, wantCreated)
			}
		}
		ttl := results[0]
		if ttl.TTLAttribute != "expires_at" {
			t.Errorf("TTL attribute: got %q, want %q", ttl.TTLAttribute, "expires_at")
		}
		// dynalite has no TTL API: tolerated, but reported.
		if ttl.TTLEnabled == (ttl.TTLUnsupported != nil) {
			t.Errorf("TTL: got enabled %v and unsupported %v, want exactly one", ttl.TTLEnabled, ttl.TTLUnsupported)
		}
		if ttl.TTLUnsupported != nil {
			t.Logf("TTL unsupported by this endpoint: %v", ttl.TTLUnsupported)
		}
		if results[1].TTLAttribute != "" || results[1].TTLEnabled || results[1].TTLUnsupported != nil {
			t.Errorf("payments TTL: got %+v, want none", results[1])
		}
	}

	out, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(idem)})
	if err != nil {
		t.Fatal(err)
	}
	d := out.Table
	if len(d.GlobalSecondaryIndexes) != 1 {
		t.Fatalf("indexes: got %d, want 1 (inflight; the table is keyed by reference)", len(d.GlobalSecondaryIndexes))
	}
	var gsi types.GlobalSecondaryIndexDescription
	for _, g := range d.GlobalSecondaryIndexes {
		if aws.ToString(g.IndexName) == "inflight" {
			gsi = g
		}
	}
	if gsi.IndexName == nil {
		t.Fatal("no index named inflight")
	}
	projected := append([]string(nil), gsi.Projection.NonKeyAttributes...)
	sort.Strings(projected)
	tests := []struct {
		name      string
		got, want any
	}{
		{"status", d.TableStatus, types.TableStatusActive},
		{"key schema", keys(d.KeySchema), []string{"ref HASH", "pk RANGE"}},
		{"index name", aws.ToString(gsi.IndexName), "inflight"},
		{"index keys", keys(gsi.KeySchema), []string{"inflight_shard HASH", "lease_expires_at RANGE"}},
		{"index projection", gsi.Projection.ProjectionType, types.ProjectionTypeInclude},
		{"index projected attributes", projected, []string{"created_at", "long_key", "owner", "status"}},
		{"index status", gsi.IndexStatus, types.IndexStatusActive},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !reflect.DeepEqual(tt.got, tt.want) {
				t.Errorf("got %v, want %v", tt.got, tt.want)
			}
		})
	}

	// The index is sparse: only the record carrying inflight_shard is in it.
	put := func(item map[string]types.AttributeValue) {
		t.Helper()
		if _, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(idem), Item: item}); err != nil {
			t.Fatal(err)
		}
	}
	put(map[string]types.AttributeValue{
		"ref": &types.AttributeValueMemberS{Value: "key:000000000001"},
		"pk":  &types.AttributeValueMemberS{Value: "in-flight"}, "status": &types.AttributeValueMemberS{Value: "IN_PROGRESS"},
		"owner": &types.AttributeValueMemberS{Value: "tok"}, "inflight_shard": &types.AttributeValueMemberN{Value: "3"},
		"lease_expires_at": &types.AttributeValueMemberN{Value: "1000"}, "created_at": &types.AttributeValueMemberN{Value: "900"},
	})
	put(map[string]types.AttributeValue{
		"ref": &types.AttributeValueMemberS{Value: "key:000000000002"},
		"pk":  &types.AttributeValueMemberS{Value: "done"}, "status": &types.AttributeValueMemberS{Value: "COMPLETED"},
		"lease_expires_at": &types.AttributeValueMemberN{Value: "1000"},
	})
	q, err := client.Query(ctx, &dynamodb.QueryInput{
		TableName:              aws.String(idem),
		IndexName:              aws.String("inflight"),
		KeyConditionExpression: aws.String("inflight_shard = :s AND lease_expires_at < :now"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":s": &types.AttributeValueMemberN{Value: "3"}, ":now": &types.AttributeValueMemberN{Value: "2000"},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if q.Count != 1 {
		t.Errorf("in-flight records in the index: got %d, want 1", q.Count)
	}
}

func keys(ks []types.KeySchemaElement) []string {
	var out []string
	for _, k := range ks {
		out = append(out, aws.ToString(k.AttributeName)+" "+string(k.KeyType))
	}
	return out
}

func TestEnsureTablesSchemaMismatch(t *testing.T) {
	ctx := t.Context()
	client := dynamotest.Client(t)
	tables := uniqueTables(t, client)
	// Someone created the idempotency table by hand, with another key.
	_, err := client.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            tables[0].Input.TableName,
		BillingMode:          types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash}},
	})
	if err != nil {
		t.Fatal(err)
	}
	results, err := infra.EnsureTables(ctx, client, tables)
	if !errors.Is(err, infra.ErrSchemaMismatch) {
		t.Errorf("got %v, want %v", err, infra.ErrSchemaMismatch)
	}
	if len(results) != 0 {
		t.Errorf("results before the failing table: got %d, want 0", len(results))
	}
}

// ttlServer adds a TTL API to a client whose server has none (dynalite),
// to exercise the path a real DynamoDB or DynamoDB Local takes.
type ttlServer struct {
	infra.TableAPI
	attr    string
	status  types.TimeToLiveStatus
	updates int
}

func (s *ttlServer) DescribeTimeToLive(_ context.Context, in *dynamodb.DescribeTimeToLiveInput, _ ...func(*dynamodb.Options)) (*dynamodb.DescribeTimeToLiveOutput, error) {
	return &dynamodb.DescribeTimeToLiveOutput{TimeToLiveDescription: &types.TimeToLiveDescription{
		AttributeName: aws.String(s.attr), TimeToLiveStatus: s.status,
	}}, nil
}

func (s *ttlServer) UpdateTimeToLive(_ context.Context, in *dynamodb.UpdateTimeToLiveInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error) {
	s.updates++
	s.attr, s.status = aws.ToString(in.TimeToLiveSpecification.AttributeName), types.TimeToLiveStatusEnabled
	return &dynamodb.UpdateTimeToLiveOutput{TimeToLiveSpecification: in.TimeToLiveSpecification}, nil
}

func TestEnsureTablesTTL(t *testing.T) {
	tests := []struct {
		name        string
		attr        string
		status      types.TimeToLiveStatus
		wantErr     error
		wantUpdates int
	}{
		{"disabled: enabled now", "", types.TimeToLiveStatusDisabled, nil, 1},
		{"already enabled: kept", "expires_at", types.TimeToLiveStatusEnabled, nil, 0},
		{"being enabled: kept", "expires_at", types.TimeToLiveStatusEnabling, nil, 0},
		{"enabled on another attribute", "ttl", types.TimeToLiveStatusEnabled, infra.ErrSchemaMismatch, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := dynamotest.Client(t)
			tables := uniqueTables(t, client)
			srv := &ttlServer{TableAPI: client, attr: tt.attr, status: tt.status}
			results, err := infra.EnsureTables(t.Context(), srv, tables[:1])
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("got %v, want %v", err, tt.wantErr)
			}
			if srv.updates != tt.wantUpdates {
				t.Errorf("UpdateTimeToLive calls: got %d, want %d", srv.updates, tt.wantUpdates)
			}
			if tt.wantErr == nil && (!results[0].TTLEnabled || results[0].TTLUnsupported != nil) {
				t.Errorf("got %+v, want TTL enabled", results[0])
			}
		})
	}
}

// creatingForever is a server on which a table never becomes ACTIVE.
type creatingForever struct{ infra.TableAPI }

func (creatingForever) CreateTable(context.Context, *dynamodb.CreateTableInput, ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error) {
	return &dynamodb.CreateTableOutput{}, nil
}

func (creatingForever) DescribeTable(context.Context, *dynamodb.DescribeTableInput, ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	return &dynamodb.DescribeTableOutput{Table: &types.TableDescription{TableStatus: types.TableStatusCreating}}, nil
}

func TestEnsureTablesStopsOnContext(t *testing.T) {
	tables, err := infra.Tables(load(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := infra.EnsureTables(ctx, creatingForever{}, tables); !errors.Is(err, context.Canceled) {
		t.Errorf("got %v, want %v", err, context.Canceled)
	}
}
