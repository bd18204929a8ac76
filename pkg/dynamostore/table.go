package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
)

// TableClient holds the DynamoDB operations CreateTable calls.
// *dynamodb.Client implements it.
type TableClient interface {
	CreateTable(ctx context.Context, params *dynamodb.CreateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	DescribeTable(ctx context.Context, params *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	UpdateTimeToLive(ctx context.Context, params *dynamodb.UpdateTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error)
}

var _ TableClient = (*dynamodb.Client)(nil)

// createWait bounds how long CreateTable waits for the table to be ACTIVE.
const createWait = 5 * time.Minute

// TableInput returns the CreateTable input of an idempotency table named
// name, keyed by reference (KeySchemaByRef), with the default attribute
// names (DefaultAttributes): partition key ref (S, dedupe.KeyRef of the
// stored key), sort key pk (S, the stored key), on-demand billing, and the
// sparse in-flight index DefaultIndex (partition inflight_shard N, sort
// lease_expires_at N, projecting owner, status, created_at and long_key:
// the reaper, whose role has no GetItem, reads everything it needs from
// the index, the full key of a key too long for the sort key included).
// FindRef queries the table itself. The in-flight index is needed only by Reap
// and InFlight: a table for a function that never uses them may drop it
// (and the attribute definitions only it uses). TTL is a separate call:
// enable it on expires_at. It is the schema of template.yaml's
// IdempotencyTable (with IdempotencyTableKeySchema ref, its default).
func TableInput(name string) *dynamodb.CreateTableInput {
	a := DefaultAttributes()
	in := tableInput(name)
	in.AttributeDefinitions = append(in.AttributeDefinitions, types.AttributeDefinition{AttributeName: aws.String(a.Ref), AttributeType: types.ScalarAttributeTypeS})
	in.KeySchema = []types.KeySchemaElement{
		{AttributeName: aws.String(a.Ref), KeyType: types.KeyTypeHash},
		{AttributeName: aws.String(a.PartitionKey), KeyType: types.KeyTypeRange},
	}
	p := in.GlobalSecondaryIndexes[0].Projection
	p.NonKeyAttributes = append(p.NonKeyAttributes, a.LongKey)
	return in
}

// ClassicTableInput returns the CreateTable input of a classic idempotency
// table (KeySchemaClassic), the schema of versions before v0.2.0: as
// TableInput, but with the partition key pk (S) alone and, for FindRef,
// the KEYS_ONLY index DefaultRefIndex on ref (S), which costs one write
// unit per fresh request more, and an in-flight index that does not
// project long_key (a classic table's items have none). It is
// template.yaml's IdempotencyTable with IdempotencyTableKeySchema
// classic, which a stack created before v0.2.0 keeps.
func ClassicTableInput(name string) *dynamodb.CreateTableInput {
	a := DefaultAttributes()
	in := tableInput(name)
	in.AttributeDefinitions = append(in.AttributeDefinitions, types.AttributeDefinition{AttributeName: aws.String(a.Ref), AttributeType: types.ScalarAttributeTypeS})
	in.KeySchema = []types.KeySchemaElement{{AttributeName: aws.String(a.PartitionKey), KeyType: types.KeyTypeHash}}
	in.GlobalSecondaryIndexes = append(in.GlobalSecondaryIndexes, types.GlobalSecondaryIndex{
		IndexName: aws.String(DefaultRefIndex),
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String(a.Ref), KeyType: types.KeyTypeHash},
		},
		Projection: &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly},
	})
	return in
}

// tableInput returns what TableInput and ClassicTableInput share: the
// table without its key schema, with the in-flight index.
func tableInput(name string) *dynamodb.CreateTableInput {
	a := DefaultAttributes()
	return &dynamodb.CreateTableInput{
		TableName:   aws.String(name),
		BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String(a.PartitionKey), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(a.InflightShard), AttributeType: types.ScalarAttributeTypeN},
			{AttributeName: aws.String(a.LeaseExpiresAt), AttributeType: types.ScalarAttributeTypeN},
		},
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{{
			IndexName: aws.String(DefaultIndex),
			KeySchema: []types.KeySchemaElement{
				{AttributeName: aws.String(a.InflightShard), KeyType: types.KeyTypeHash},
				{AttributeName: aws.String(a.LeaseExpiresAt), KeyType: types.KeyTypeRange},
			},
			Projection: &types.Projection{
				ProjectionType:   types.ProjectionTypeInclude,
				NonKeyAttributes: []string{a.Owner, a.Status, a.CreatedAt},
			},
		}},
	}
}

// CreateTable creates the idempotency table name (TableInput), waits until
// it is ACTIVE (up to five minutes, or ctx; asking again 100 ms after the
// first answer, then at most every 5 s) and enables TTL on expires_at.
// It is for users outside SAM, scripts and tests; a server without TTL
// (some local ones) is accepted, since stores never rely on TTL deletion
// (expiry is computed from the clock). An existing table is an error
// wrapping *types.ResourceInUseException.
func CreateTable(ctx context.Context, client TableClient, name string) error {
	if _, err := client.CreateTable(ctx, TableInput(name)); err != nil {
		return fmt.Errorf("dynamostore: create table %s: %w", name, err)
	}
	w := dynamodb.NewTableExistsWaiter(client, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay, o.MaxDelay = 100*time.Millisecond, 5*time.Second
	})
	if err := w.Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)}, createWait); err != nil {
		return fmt.Errorf("dynamostore: wait for table %s: %w", name, err)
	}
	_, err := client.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName: aws.String(name),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{
			AttributeName: aws.String(DefaultAttributes().ExpiresAt),
			Enabled:       aws.Bool(true),
		},
	})
	var apiErr smithy.APIError
	if err != nil && !(errors.As(err, &apiErr) && (apiErr.ErrorCode() == "UnknownOperationException" || apiErr.ErrorCode() == "NotImplemented")) {
		return fmt.Errorf("dynamostore: enable TTL on table %s: %w", name, err)
	}
	return nil
}
