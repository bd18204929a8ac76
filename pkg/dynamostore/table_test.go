package dynamostore_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/lambda-dedupe/dedupe/infra"
	"github.com/lambda-dedupe/dedupe/localtest/dynamotest"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/dynamostore"
)

// TableInput must stay the schema the template deploys by default, and
// ClassicTableInput the one it deploys with IdempotencyTableKeySchema
// classic.
func TestTableInputMatchesTemplate(t *testing.T) {
	for _, tt := range []struct {
		schema string // the template parameter; "" its default
		input  *dynamodb.CreateTableInput
	}{{"", dynamostore.TableInput("t")}, {"ref", dynamostore.TableInput("t")}, {"classic", dynamostore.ClassicTableInput("t")}} {
		t.Run("schema "+tt.schema, func(t *testing.T) { templateTable(t, tt.schema, tt.input) })
	}
}

func templateTable(t *testing.T, schema string, want *dynamodb.CreateTableInput) {
	path, err := infra.FindTemplate()
	if err != nil {
		t.Fatal(err)
	}
	opts := &infra.Options{Names: map[string]string{"IdempotencyTable": "t"}}
	if schema != "" {
		opts.Parameters = map[string]string{"IdempotencyTableKeySchema": schema}
	}
	tpl, err := infra.LoadWithOptions(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	tables, err := infra.Tables(tpl)
	if err != nil {
		t.Fatal(err)
	}
	for _, tb := range tables {
		if tb.LogicalID != "IdempotencyTable" {
			continue
		}
		if !reflect.DeepEqual(want, tb.Input) {
			t.Errorf("TableInput = %+v, want the template's %+v", want, tb.Input)
		}
		if tb.TTLAttribute != dynamostore.DefaultAttributes().ExpiresAt {
			t.Errorf("template TTL on %q, want %q", tb.TTLAttribute, dynamostore.DefaultAttributes().ExpiresAt)
		}
		return
	}
	t.Fatal("the template declares no IdempotencyTable")
}

func TestCreateTable(t *testing.T) {
	client := testClient(t)
	name := dynamotest.UniqueName("create-table")
	t.Cleanup(func() {
		client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(name)})
	})
	ctx := t.Context()
	if err := dynamostore.CreateTable(ctx, client, name); err != nil {
		t.Fatal(err)
	}
	if err := dynamostore.CreateTable(ctx, client, name); err == nil {
		t.Errorf("CreateTable on an existing table = nil, want an error")
	}
	s, err := dynamostore.New(client, dynamostore.Options{Table: name})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	res, err := s.Claim(ctx, dedupe.ClaimRequest{Key: "k", Fingerprint: "f", Token: "t", Now: now,
		LeaseUntil: now.Add(time.Minute), ExpiresAt: now.Add(time.Hour)})
	if err != nil || !res.Acquired {
		t.Fatalf("Claim on the new table = %+v, %v; want acquired", res, err)
	}
	// The in-flight index is there: the reaper can query it.
	if _, err := s.Reap(ctx, dynamostore.ReapOptions{Now: func() time.Time { return now.Add(2 * time.Minute) }}); err != nil {
		t.Errorf("Reap on the new table: %v", err)
	}
}
