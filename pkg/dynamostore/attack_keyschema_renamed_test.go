package dynamostore_test

import (
	"context"
	"crypto/rand"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambda-dedupe/dedupe/localtest/dynamotest"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe/dedupetest"
	"github.com/lambda-dedupe/dedupe/pkg/dynamostore"
)

// renamedByRef are the attribute names of a table keyed by reference
// whose every name the store writes is renamed, long_key included.
var renamedByRef = dynamostore.Attributes{
	PartitionKey: "K", Ref: "R", LongKey: "LK", Status: "st", Owner: "own", LeaseExpiresAt: "lease_ms",
	ExpiresAt: "ttl", InflightShard: "SH", ResBody: "body", ResItem: "bitem", FirstToken: "first",
	CreatedAt: "c", UpdatedAt: "u", Fingerprint: "fp",
}

// createRenamedByRef creates a table keyed by reference with the names of
// renamedByRef (partition R, sort K, in-flight index GSI1 on SH and
// lease_ms) and returns its name.
func createRenamedByRef(t *testing.T, c *dynamodb.Client) string {
	t.Helper()
	a := renamedByRef
	name := dynamotest.UniqueName("renamed-byref")
	ctx := context.Background()
	_, err := c.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:   aws.String(name),
		BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String(a.Ref), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(a.PartitionKey), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(a.InflightShard), AttributeType: types.ScalarAttributeTypeN},
			{AttributeName: aws.String(a.LeaseExpiresAt), AttributeType: types.ScalarAttributeTypeN},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String(a.Ref), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String(a.PartitionKey), KeyType: types.KeyTypeRange},
		},
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{{
			IndexName: aws.String("GSI1"),
			KeySchema: []types.KeySchemaElement{
				{AttributeName: aws.String(a.InflightShard), KeyType: types.KeyTypeHash},
				{AttributeName: aws.String(a.LeaseExpiresAt), KeyType: types.KeyTypeRange},
			},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeInclude, NonKeyAttributes: []string{a.Owner, a.Status, a.CreatedAt}},
		}},
	})
	if err != nil {
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
	return name
}

// TestAttackRenamedByRefContract: a table keyed by reference under other
// attribute names (Options.Attributes, every name the store writes,
// Ref, PartitionKey and LongKey included) is detected as keyed by
// reference and keeps the store contract and the operator's, as the
// template's table does.
func TestAttackRenamedByRefContract(t *testing.T) {
	c := testClient(t)
	table := createRenamedByRef(t, c)
	newStore := func(t *testing.T) dedupe.Store {
		s, err := dynamostore.New(c, dynamostore.Options{Table: table, Attributes: renamedByRef, Index: "GSI1"})
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		if got := s.KeySchema(); got != dynamostore.KeySchemaByRef {
			t.Fatalf("KeySchema() = %v, want KeySchemaByRef", got)
		}
		return s
	}
	t.Run("contract", func(t *testing.T) { dedupetest.Run(t, newStore) })
	t.Run("admin", func(t *testing.T) { dedupetest.RunAdmin(t, newStore) })
}

// TestAttackRenamedByRefLongKeys: on a renamed table keyed by reference,
// a key too long for the sort key lives its whole life under its own
// name: claimed, found by reference and in flight under its full key,
// reaped, taken over, completed with a body item, replayed, and
// forgotten; the full key sits in the renamed LongKey attribute, never
// in the default one.
func TestAttackRenamedByRefLongKeys(t *testing.T) {
	c := testClient(t)
	table := createRenamedByRef(t, c)
	s, err := dynamostore.New(c, dynamostore.Options{Table: table, Attributes: renamedByRef, Index: "GSI1"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	key := "renamed/" + rand.Text() + "/" + strings.Repeat("é", 600)
	if _, err := s.Claim(ctx, dedupe.ClaimRequest{Key: key, Fingerprint: "f", Token: "a", Now: base, LeaseUntil: base.Add(time.Second), ExpiresAt: base.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if recs, err := s.FindRef(ctx, dedupe.KeyRef(key), base); err != nil || len(recs) != 1 || recs[0].Key != key {
		t.Errorf("FindRef = %d records, %v; want the record under its full key", len(recs), err)
	}
	inflight, _, err := s.InFlight(ctx, base, 100)
	if err != nil || len(inflight) != 1 || inflight[0].Key != key {
		t.Errorf("InFlight = %d records, %v; want the record under its full key", len(inflight), err)
	}
	rep, err := s.Reap(ctx, dynamostore.ReapOptions{Now: func() time.Time { return base.Add(time.Minute) }, Grace: time.Nanosecond})
	if err != nil || rep.Cleared != 1 || rep.Errors != 0 {
		t.Errorf("Reap = %+v, %v; want the stranded record cleared", rep, err)
	}
	later := base.Add(2 * time.Minute)
	if res, err := s.Claim(ctx, dedupe.ClaimRequest{Key: key, Fingerprint: "f", Token: "b", Now: later, LeaseUntil: later.Add(time.Minute), ExpiresAt: later.Add(time.Hour)}); err != nil || !res.Acquired {
		t.Fatalf("takeover = %+v, %v", res, err)
	}
	body := make([]byte, 5000) // incompressible: a body item
	rand.Read(body)
	if err := s.Complete(ctx, dedupe.CompleteRequest{Key: key, Token: "b", Now: later, ExpiresAt: later.Add(time.Hour), Result: dedupe.Result{StatusCode: 201, Body: body}}); err != nil {
		t.Fatal(err)
	}
	res, err := s.Claim(ctx, dedupe.ClaimRequest{Key: key, Fingerprint: "f", Token: "c", Now: later, LeaseUntil: later.Add(time.Minute), ExpiresAt: later.Add(time.Hour)})
	if err != nil || res.Acquired || res.Record.Key != key || res.Record.Result == nil || string(res.Record.Result.Body) != string(body) {
		t.Fatalf("replay = acquired %v, key kept %v, %v; want the stored body", res.Acquired, res.Record.Key == key, err)
	}
	out, err := c.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true), Key: map[string]types.AttributeValue{
		"R": &types.AttributeValueMemberS{Value: dedupe.KeyRef(key)}, "K": &types.AttributeValueMemberS{Value: dynamostore.SortKeyValue(key)}}})
	if err != nil {
		t.Fatal(err)
	}
	if lk, ok := out.Item["LK"].(*types.AttributeValueMemberS); !ok || lk.Value != key {
		t.Errorf("renamed LongKey attribute = %v, want the full key", out.Item["LK"])
	}
	for _, n := range []string{"long_key", "pk", "ref"} {
		if _, ok := out.Item[n]; ok {
			t.Errorf("item carries the default attribute %q", n)
		}
	}
	if err := s.Forget(ctx, key, "b"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, key, later); err == nil {
		t.Errorf("Get after Forget = nil, want ErrNotFound")
	}
}
