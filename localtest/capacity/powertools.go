package capacity

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Powertools makes the DynamoDB calls of Powertools for AWS Lambda's
// idempotency utility (TypeScript 2, DynamoDBPersistenceLayer with its
// default attribute names, no payload validation), so that a Meter counts
// what it costs by the same rules as the store:
//
//   - the claim is a PutItem of id, expiration, in_progress_expiration
//     and status INPROGRESS, conditioned on the key being absent, expired,
//     or in progress with a lapsed in-progress expiry, returning the
//     existing item when the condition fails (ALL_OLD);
//   - a completion is an UpdateItem that sets data (the handler's result
//     as JSON: statusCode, headers and body, as the utility stores an API
//     Gateway response), status COMPLETED and expiration;
//   - a replay is the claim failing on the completed item;
//   - a failure deletes the item (DeleteItem), so the retry claims afresh.
//
// The table's partition key keeps its name (pk here, id in Powertools'
// default; both two bytes, so the sizes are the same).
type Powertools struct {
	// Client is the client the calls go through, with DeleteItem.
	Client interface {
		PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
		UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
		DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, o ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	}
	Table string
	// Function is the function name, the prefix of every record's id.
	Function string
}

// Run is one request with key: it claims, and replays the stored result
// when the claim fails on a completed record; otherwise it completes with
// body (an API Gateway response of status 201 and a JSON content type),
// or deletes the record when fail is set.
func (p Powertools) Run(ctx context.Context, key string, body []byte, fail bool) error {
	sum := md5.Sum([]byte(key))
	id := &types.AttributeValueMemberS{Value: p.Function + "#" + hex.EncodeToString(sum[:])}
	now := time.Now()
	n := func(v int64) types.AttributeValue {
		return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
	}
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	_, err := p.Client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(p.Table),
		Item: map[string]types.AttributeValue{"pk": id, "expiration": n(now.Add(time.Hour).Unix()),
			"in_progress_expiration": n(now.Add(time.Minute).UnixMilli()), "status": s("INPROGRESS")},
		ConditionExpression: aws.String("attribute_not_exists(#id) OR #expiry < :now OR " +
			"(#status = :inprogress AND attribute_exists(#in_progress_expiry) AND #in_progress_expiry < :now_in_millis)"),
		ExpressionAttributeNames: map[string]string{"#id": "pk", "#expiry": "expiration", "#in_progress_expiry": "in_progress_expiration", "#status": "status"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":now": n(now.Unix()), ":now_in_millis": n(now.UnixMilli()),
			":inprogress": s("INPROGRESS")},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var ccf *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &ccf):
		return nil // a replay (or in progress): the item came back with the failure
	case err != nil:
		return err
	}
	key1 := map[string]types.AttributeValue{"pk": id}
	if fail {
		_, err := p.Client.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(p.Table), Key: key1})
		return err
	}
	data, err := json.Marshal(struct {
		StatusCode int               `json:"statusCode"`
		Headers    map[string]string `json:"headers"`
		Body       string            `json:"body"`
	}{201, map[string]string{"Content-Type": "application/json"}, string(body)})
	if err != nil {
		return err
	}
	_, err = p.Client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(p.Table), Key: key1,
		UpdateExpression:         aws.String("SET #response_data = :response_data, #expiry = :expiry, #status = :status"),
		ExpressionAttributeNames: map[string]string{"#response_data": "data", "#expiry": "expiration", "#status": "status"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":response_data": s(string(data)),
			":expiry": n(now.Add(time.Hour).Unix()), ":status": s("COMPLETED")},
	})
	return err
}
