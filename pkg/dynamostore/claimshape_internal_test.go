package dynamostore

import (
	"context"
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
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

// exprRef is a name or value an expression uses.
var exprRef = regexp.MustCompile(`[#:][A-Za-z]+`)

// checkDeclared fails t unless in declares exactly the names and values
// its expressions use, none of them nil.
func checkDeclared(t *testing.T, in *dynamodb.UpdateItemInput) {
	t.Helper()
	used := exprRef.FindAllString(*in.UpdateExpression+" "+*in.ConditionExpression, -1)
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
				checkDeclared(t, in)
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

// TestCompleteInputsArePrivateAndComplete is
// TestClaimInputsArePrivateAndComplete for Complete's UpdateItem (cloned
// from the store's completeShape), for each kind of result it stores.
func TestCompleteInputsArePrivateAndComplete(t *testing.T) {
	tests := []struct {
		name      string
		result    dedupe.Result
		requestID string
	}{
		{name: "empty result", result: dedupe.Result{StatusCode: 204}},
		{name: "body and headers", result: dedupe.Result{StatusCode: 201, Headers: map[string][]string{"Content-Type": {"application/json"}}, Body: []byte(`{"id":1}`)}},
		{name: "provenance", result: dedupe.Result{StatusCode: 200, Body: []byte("ok")}, requestID: "req-1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &claimInputs{}
			s, err := New(c, Options{Table: "mem", GlobalTables: GlobalTablesUnchecked, KeySchema: KeySchemaByRef})
			if err != nil {
				t.Fatal(err)
			}
			for _, token := range []string{"tok-1", "tok-2"} {
				// The client fails every condition: the lease is lost.
				if err := s.Complete(context.Background(), completion(memClaim("p#k", token, tt.requestID, ""), tt.result)); !errors.Is(err, dedupe.ErrLeaseLost) {
					t.Fatalf("got %v, want ErrLeaseLost", err)
				}
			}
			if len(c.ins) != 2 {
				t.Fatalf("got %d completions, want 2", len(c.ins))
			}
			for _, in := range c.ins {
				checkDeclared(t, in)
			}
			first, second := c.ins[0], c.ins[1]
			if got := second.ExpressionAttributeValues[":tok"].(*types.AttributeValueMemberS).Value; got != "tok-2" {
				t.Errorf("got the second completion's :tok %q, want tok-2", got)
			}
			first.ExpressionAttributeNames["#owner"] = "changed"
			if second.ExpressionAttributeNames["#owner"] == "changed" {
				t.Error("changing the first completion's names changed the second's")
			}
		})
	}
}
