package dynamostore_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambda-dedupe/dedupe/localtest/dynamotest"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/dynamostore"
)

// TestAttackSortKeySharedTable states, for a classic single-table design
// (Options.SortKey) shared by two stores under different sort key
// values: each store's operator lookups see its own records only, once
// each. The same key claimed in both stores is two records; FindRef
// (the ref index, which lists both items) answers each store with its
// own record, once, as InFlight and Reap do; and Forget in one store
// leaves the other's.
func TestAttackSortKeySharedTable(t *testing.T) {
	c := testClient(t)
	name := dynamotest.UniqueName("shared-single")
	ctx := context.Background()
	s := func(n string) *string { return aws.String(n) }
	_, err := c.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:   s(name),
		BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: s("PK"), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: s("SK"), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: s("ref"), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: s("inflight_shard"), AttributeType: types.ScalarAttributeTypeN},
			{AttributeName: s("lease_expires_at"), AttributeType: types.ScalarAttributeTypeN},
		},
		KeySchema: []types.KeySchemaElement{{AttributeName: s("PK"), KeyType: types.KeyTypeHash}, {AttributeName: s("SK"), KeyType: types.KeyTypeRange}},
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{{
			IndexName:  s("ref"),
			KeySchema:  []types.KeySchemaElement{{AttributeName: s("ref"), KeyType: types.KeyTypeHash}},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly},
		}, {
			IndexName: s("inflight"),
			KeySchema: []types.KeySchemaElement{
				{AttributeName: s("inflight_shard"), KeyType: types.KeyTypeHash},
				{AttributeName: s("lease_expires_at"), KeyType: types.KeyTypeRange},
			},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeInclude, NonKeyAttributes: []string{"owner", "status", "created_at"}},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = c.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: s(name)}) })
	w := dynamodb.NewTableExistsWaiter(c, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay, o.MaxDelay = 10*time.Millisecond, 200*time.Millisecond
	})
	if err := w.Wait(ctx, &dynamodb.DescribeTableInput{TableName: s(name)}, time.Minute); err != nil {
		t.Fatal(err)
	}
	stores := map[string]*dynamostore.Store{}
	for _, v := range []string{"A", "B"} {
		st, err := dynamostore.New(c, dynamostore.Options{Table: name, SortKey: dynamostore.SortKey{Name: "SK", Value: v}, Attributes: dynamostore.Attributes{PartitionKey: "PK"}})
		if err != nil {
			t.Fatal(err)
		}
		stores[v] = st
	}
	key := "shared/" + rand.Text()
	for v, st := range stores {
		if _, err := st.Claim(ctx, dedupe.ClaimRequest{Key: key, Fingerprint: "f", Token: "tok-" + v, Now: base, LeaseUntil: base.Add(time.Minute), ExpiresAt: base.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	// The ref index is eventually consistent: poll (without sleeping on
	// a clock the test reads) until it lists both items.
	for range 100 {
		out, err := c.Query(ctx, &dynamodb.QueryInput{TableName: s(name), IndexName: s("ref"), KeyConditionExpression: s("#r = :r"),
			ExpressionAttributeNames: map[string]string{"#r": "ref"}, ExpressionAttributeValues: map[string]types.AttributeValue{":r": &types.AttributeValueMemberS{Value: dedupe.KeyRef(key)}}})
		if err == nil && len(out.Items) == 2 {
			break
		}
	}
	for v, st := range stores {
		recs, err := st.FindRef(ctx, dedupe.KeyRef(key), base)
		if err != nil || len(recs) != 1 || recs[0].Token != "tok-"+v {
			t.Errorf("FindRef in store %s = %d records, %v; want its own record once", v, len(recs), err)
		}
	}
	for v, st := range stores {
		recs, _, err := st.InFlight(ctx, base, 10)
		if err != nil || len(recs) != 1 || recs[0].Token != "tok-"+v {
			t.Errorf("InFlight in store %s = %d records, %v; want its own record once", v, len(recs), err)
		}
	}
	// Stranded in both: each store's reaper retires its own record and
	// counts nothing of the other's.
	rep, err := stores["A"].Reap(ctx, dynamostore.ReapOptions{Now: func() time.Time { return base.Add(time.Hour / 2) }, Grace: time.Nanosecond})
	if err != nil || rep.Found != 1 || rep.Cleared != 1 || rep.Skipped != 0 {
		t.Errorf("Reap in store A = %+v, %v; want its own record found and cleared, nothing of B's", rep, err)
	}
	// A third store under its own value, with another shard count: its
	// stranded records, filed by its count, are no shard mismatch of A's.
	c3, err := dynamostore.New(c, dynamostore.Options{Table: name, SortKey: dynamostore.SortKey{Name: "SK", Value: "C"}, Attributes: dynamostore.Attributes{PartitionKey: "PK"}, Shards: 3})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 8 {
		if _, err := c3.Claim(ctx, dedupe.ClaimRequest{Key: fmt.Sprintf("%s/c/%d", key, i), Fingerprint: "f", Token: "tok-C", Now: base, LeaseUntil: base.Add(time.Minute), ExpiresAt: base.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	if rep, err := stores["A"].Reap(ctx, dynamostore.ReapOptions{Now: func() time.Time { return base.Add(time.Hour / 2) }, Grace: time.Nanosecond}); err != nil || rep.Errors != 0 || rep.Found != 0 {
		t.Errorf("Reap in store A beside C's stranded records = %+v, %v; want nothing found, no shard mismatch", rep, err)
	}
	if recs, _, err := stores["A"].InFlight(ctx, base, 100); err != nil || len(recs) != 1 {
		t.Errorf("InFlight in store A beside C's records = %d records, %v; want A's own, no shard mismatch", len(recs), err)
	}
	if err := stores["A"].Complete(ctx, dedupe.CompleteRequest{Key: key, Token: "tok-A", Now: base, ExpiresAt: base.Add(time.Hour), Result: dedupe.Result{StatusCode: 200}}); err != nil {
		t.Fatal(err)
	}
	if err := stores["A"].Forget(ctx, key, "tok-A"); err != nil {
		t.Fatal(err)
	}
	if rec, err := stores["B"].Get(ctx, key, base); err != nil || rec.Token != "tok-B" {
		t.Errorf("B's record after A forgot the key = %q, %v; want kept", rec.Token, err)
	}
}
