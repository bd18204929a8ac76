package capacity_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambda-dedupe/dedupe/localtest/capacity"
	"github.com/lambda-dedupe/dedupe/localtest/dynamotest"
)

// TestMeasure runs every scenario, mode and size.
func TestMeasure(t *testing.T) {
	client := dynamotest.Client(t)
	table := dynamotest.IdempotencyTable(t, client)
	rows, err := capacity.Measure(t.Context(), client, table, dynamotest.ClassicIdempotencyTable(t, client), true)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	capacity.Print(&b, rows)
	t.Log("\n" + b.String())
}

// TestFailedWrite: a conditional write whose condition fails is charged
// by the larger of the existing item and the one it would have written
// (a PutItem's item, an UpdateItem's result), and returns the existing
// item (ALL_OLD) at no read.
func TestFailedWrite(t *testing.T) {
	client := dynamotest.Client(t)
	table := dynamotest.ClassicIdempotencyTable(t, client)
	m := capacity.New(client, capacity.ClassicSchema(), true)
	ctx := t.Context()
	key := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "k"}}
	if _, err := m.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: key}); err != nil {
		t.Fatal(err)
	}
	big := &types.AttributeValueMemberB{Value: make([]byte, 2500)}
	never := aws.String("attribute_not_exists(pk)")
	tests := []struct {
		name string
		call func() error
	}{
		{"put", func() error {
			_, err := m.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]types.AttributeValue{"pk": key["pk"], "b": big},
				ConditionExpression: never, ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld})
			return err
		}},
		{"update", func() error {
			_, err := m.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(table), Key: key,
				UpdateExpression: aws.String("SET #b = if_not_exists(#b, :b), #c = :c REMOVE #d"), ExpressionAttributeNames: map[string]string{"#b": "b", "#c": "c", "#d": "d"},
				ExpressionAttributeValues: map[string]types.AttributeValue{":b": big, ":c": big},
				ConditionExpression:       never, ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld})
			return err
		}},
	}
	want := map[string]capacity.Units{"put": {Write: 3}, "update": {Write: 5}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m.Reset()
			err := tt.call()
			var ccf *types.ConditionalCheckFailedException
			if !errors.As(err, &ccf) || len(ccf.Item) == 0 {
				t.Fatalf("got %v (item %v), want a failed condition with the existing item", err, ccf)
			}
			if got := m.Units(); got != want[tt.name] {
				t.Errorf("got %+v, want %+v", got, want[tt.name])
			}
		})
	}
}
