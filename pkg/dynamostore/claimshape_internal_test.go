package dynamostore

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// claimInputs is a Client whose claim fails on a record that then reads
// as gone: it keeps each claim's UpdateItem input.
type claimInputs struct {
	Client
	ins []*dynamodb.UpdateItemInput
}

func (c *claimInputs) UpdateItem(_ context.Context, in *dynamodb.UpdateItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	c.ins = append(c.ins, in)
	return nil, &types.ConditionalCheckFailedException{Message: aws.String("failed")}
}

func (c *claimInputs) GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return &dynamodb.GetItemOutput{}, nil
}

// TestClaimInputsArePrivateAndComplete: the claim's maps are cloned from
// the store's claimShape (see there). Each claim's input must still be
// its own (a wrapper that changes one changes no other claim's), carry
// its own values, and name exactly the names and values its expressions
// use (DynamoDB refuses one unused), on each key schema and option that
// changes the claim.
func TestClaimInputsArePrivateAndComplete(t *testing.T) {
	tests := []struct {
		name      string
		opts      Options
		key       string
		requestID string
		trace     string
	}{
		{name: "by ref", opts: Options{KeySchema: KeySchemaByRef}, key: "p#k"},
		{name: "classic", opts: Options{KeySchema: KeySchemaClassic}, key: "p#k"},
		{name: "lean", opts: Options{KeySchema: KeySchemaByRef, Lean: true}, key: "p#k"},
		{name: "long key", opts: Options{KeySchema: KeySchemaByRef}, key: "p#" + strings.Repeat("k", MaxPlainSortKey)},
		{name: "provenance", opts: Options{KeySchema: KeySchemaByRef}, key: "p#k", requestID: "req-1", trace: "Root=1-abc"},
	}
	ref := regexp.MustCompile(`[#:][A-Za-z]+`)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &claimInputs{}
			tt.opts.Table, tt.opts.GlobalTables = "mem", GlobalTablesUnchecked
			s, err := New(c, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			for _, token := range []string{"tok-1", "tok-2"} {
				if _, err := s.Claim(context.Background(), memClaim(tt.key, token, tt.requestID, tt.trace)); err != nil {
					t.Fatal(err)
				}
			}
			if len(c.ins) != 2 {
				t.Fatalf("got %d claims, want 2", len(c.ins))
			}
			first, second := c.ins[0], c.ins[1]
			for _, in := range c.ins {
				used := ref.FindAllString(*in.UpdateExpression+" "+*in.ConditionExpression, -1)
				slices.Sort(used)
				used = slices.Compact(used)
				var declared []string
				for k := range in.ExpressionAttributeNames {
					declared = append(declared, k)
				}
				for k, v := range in.ExpressionAttributeValues {
					if v == nil {
						t.Errorf("value %s is nil", k)
					}
					declared = append(declared, k)
				}
				slices.Sort(declared)
				if !slices.Equal(declared, used) {
					t.Errorf("got names and values %v, want those the expressions use %v", declared, used)
				}
			}
			if got := second.ExpressionAttributeValues[":tok"].(*types.AttributeValueMemberS).Value; got != "tok-2" {
				t.Errorf("got the second claim's :tok %q, want tok-2", got)
			}
			first.ExpressionAttributeNames["#pk"] = "changed"
			first.ExpressionAttributeValues[":tok"] = str("changed")
			if second.ExpressionAttributeNames["#pk"] == "changed" || second.ExpressionAttributeValues[":tok"].(*types.AttributeValueMemberS).Value == "changed" {
				t.Error("changing the first claim's maps changed the second's")
			}
			if _, err := s.Claim(context.Background(), memClaim(tt.key, "tok-3", tt.requestID, tt.trace)); err != nil {
				t.Fatal(err)
			}
			if got := c.ins[2].ExpressionAttributeNames["#pk"]; got != s.attr.PartitionKey {
				t.Errorf("after a wrapper changed a claim's names, the next claim's #pk is %q, want %q", got, s.attr.PartitionKey)
			}
		})
	}
}
