package payments_test

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambda-dedupe/dedupe/functions/api/internal/payments"
	"github.com/lambda-dedupe/dedupe/localtest/dynamotest"
)

// TestDynamoRepositoryItemFormat pins the stored item, attribute by
// attribute and type by type, so that rows written before the switch to
// attributevalue still read, and checks that a damaged row is an error,
// not a zero payment.
func TestDynamoRepositoryItemFormat(t *testing.T) {
	ctx := context.Background()
	client := dynamotest.Client(t)
	table := dynamotest.CreateTables(t, client, "PaymentsTable")["PaymentsTable"]
	repo := payments.NewDynamoRepository(client, table)
	created := time.Date(2031, 5, 6, 7, 8, 9, 120_000_000, time.FixedZone("CEST", 2*3600))
	p := payments.Payment{ID: "pay_F", Amount: 1250, Currency: "EUR", Source: "tok_visa", Status: payments.StatusDeclined, Created: created, Owner: "own_alice"}
	if _, err := repo.Put(ctx, p); err != nil {
		t.Fatal(err)
	}
	out, err := client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(table), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: "pay_F"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]types.AttributeValue{
		"id":       &types.AttributeValueMemberS{Value: "pay_F"},
		"amount":   &types.AttributeValueMemberN{Value: "1250"},
		"currency": &types.AttributeValueMemberS{Value: "EUR"},
		"source":   &types.AttributeValueMemberS{Value: "tok_visa"},
		"status":   &types.AttributeValueMemberS{Value: "declined"},
		"created":  &types.AttributeValueMemberS{Value: "2031-05-06T05:08:09.120Z"},
		"owner":    &types.AttributeValueMemberS{Value: "own_alice"},
	}
	if !reflect.DeepEqual(out.Item, want) {
		t.Errorf("stored item: got %#v, want %#v", out.Item, want)
	}

	tests := []struct {
		name    string
		item    map[string]types.AttributeValue
		wantErr string
	}{
		{"amount missing", without(want, "amount"), "attribute amount: missing"},
		{"amount not a number", with(want, "amount", &types.AttributeValueMemberS{Value: "12"}), "amount"},
		{"created not a time", with(want, "created", &types.AttributeValueMemberS{Value: "yesterday"}), "attribute created"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := "pay_bad_" + strings.ReplaceAll(tt.name, " ", "_")
			item := with(tt.item, "id", &types.AttributeValueMemberS{Value: id})
			if _, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item}); err != nil {
				t.Fatal(err)
			}
			_, err := repo.Get(ctx, id)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Get: got %v, want an error about %q", err, tt.wantErr)
			}
		})
	}
}

// with returns a copy of item with name set to v.
func with(item map[string]types.AttributeValue, name string, v types.AttributeValue) map[string]types.AttributeValue {
	out := make(map[string]types.AttributeValue, len(item)+1)
	for k, x := range item {
		out[k] = x
	}
	out[name] = v
	return out
}

// without returns a copy of item without name.
func without(item map[string]types.AttributeValue, name string) map[string]types.AttributeValue {
	out := with(item, name, nil)
	delete(out, name)
	return out
}
