package dynamostore_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambda-dedupe/dedupe/pkg/dynamostore"
)

// TestGlobalTablesRefusalSaysWhy: New's refusal of a global table in
// eventual consistency tells the operator what DynamoDB said about it, so
// that they can tell which setting to change: the replicas' Regions and
// the table's MultiRegionConsistency, and, when DescribeTable gave none
// (replicas created before the field existed), that none was given and
// that this means EVENTUAL, which a table that states EVENTUAL is never
// said to lack.
func TestGlobalTablesRefusalSaysWhy(t *testing.T) {
	for _, tt := range []struct {
		name     string
		table    *types.TableDescription
		want     []string
		wantNone []string
	}{
		{"EVENTUAL stated", &types.TableDescription{Replicas: replicas("eu-west-1", "ap-south-1"),
			MultiRegionConsistency: types.MultiRegionConsistencyEventual},
			[]string{"replicas [eu-west-1 ap-south-1], EVENTUAL"}, []string{"no MultiRegionConsistency"}},
		{"no MultiRegionConsistency", &types.TableDescription{Replicas: replicas("eu-west-1")},
			[]string{"replicas [eu-west-1], no MultiRegionConsistency, so EVENTUAL"}, nil},
		{"2017 global tables", &types.TableDescription{GlobalTableVersion: aws.String("2017.11.29"), Replicas: replicas("eu-west-1"),
			MultiRegionConsistency: types.MultiRegionConsistencyStrong},
			[]string{"global tables version 2017.11.29"}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := dynamostore.New(&describeStub{table: tt.table}, dynamostore.Options{Table: "t"})
			if !errors.Is(err, dynamostore.ErrInvalidOptions) {
				t.Fatalf("New = %v, want ErrInvalidOptions", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("refusal %q does not say %q", err, w)
				}
			}
			for _, w := range tt.wantNone {
				if strings.Contains(err.Error(), w) {
					t.Errorf("refusal %q says %q", err, w)
				}
			}
		})
	}
}
