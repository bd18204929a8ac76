package dynamostore_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambda-dedupe/dedupe/pkg/dynamostore"
)

// creatingClient is a TableClient whose table stays CREATING for its
// first creating DescribeTable calls, then is ACTIVE; it records when each
// call came.
type creatingClient struct {
	ttlClient
	creating int
	calls    []time.Time
}

func (c *creatingClient) DescribeTable(context.Context, *dynamodb.DescribeTableInput, ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	c.calls = append(c.calls, time.Now())
	status := types.TableStatusActive
	if len(c.calls) <= c.creating {
		status = types.TableStatusCreating
	}
	return &dynamodb.DescribeTableOutput{Table: &types.TableDescription{TableStatus: status}}, nil
}

// TestCreateTableWaitsNoLongerThanItMust states what CreateTable's doc
// promises of its wait: it returns soon after the table is ACTIVE, asking
// first 100 ms after a CREATING answer and never more than 5 s apart
// however long the creation takes (DynamoDB's waiter would otherwise wait
// 20 s at first and up to 2 minutes between calls). Fake time (synctest):
// a table CREATING for 14 answers.
func TestCreateTableWaitsNoLongerThanItMust(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &creatingClient{creating: 14}
		if err := dynamostore.CreateTable(t.Context(), c, "t"); err != nil {
			t.Fatalf("CreateTable: %v", err)
		}
		if len(c.calls) != c.creating+1 {
			t.Fatalf("%d DescribeTable calls, want %d (until ACTIVE)", len(c.calls), c.creating+1)
		}
		if gap := c.calls[1].Sub(c.calls[0]); gap > 100*time.Millisecond {
			t.Errorf("first call again after %v, want at most 100ms", gap)
		}
		for i := 1; i < len(c.calls); i++ {
			if gap := c.calls[i].Sub(c.calls[i-1]); gap > 5*time.Second {
				t.Errorf("call %d came %v after the one before, want at most 5s", i+1, gap)
			}
		}
	})
}
