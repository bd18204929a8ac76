package dynamostore_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/lambda-dedupe/dedupe/localtest/dynamotest"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/dynamostore"
)

// schema names the key attributes of a hand-built test table, for the
// schemas the template does not declare (single-table designs).
type schema struct {
	pk, sk        string // sk empty: no sort key
	shard, lease  string
	index         string
	projectedKeys []string
}

// createTable creates a table with schema sc and deletes it when the test
// ends.
func createTable(t testing.TB, c *dynamodb.Client, name string, sc schema) {
	t.Helper()
	defs := []types.AttributeDefinition{
		{AttributeName: aws.String(sc.pk), AttributeType: types.ScalarAttributeTypeS},
		{AttributeName: aws.String(sc.shard), AttributeType: types.ScalarAttributeTypeN},
		{AttributeName: aws.String(sc.lease), AttributeType: types.ScalarAttributeTypeN},
	}
	keys := []types.KeySchemaElement{{AttributeName: aws.String(sc.pk), KeyType: types.KeyTypeHash}}
	if sc.sk != "" {
		defs = append(defs, types.AttributeDefinition{AttributeName: aws.String(sc.sk), AttributeType: types.ScalarAttributeTypeS})
		keys = append(keys, types.KeySchemaElement{AttributeName: aws.String(sc.sk), KeyType: types.KeyTypeRange})
	}
	ctx := context.Background()
	_, err := c.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(name),
		BillingMode:          types.BillingModePayPerRequest,
		AttributeDefinitions: defs,
		KeySchema:            keys,
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{{
			IndexName: aws.String(sc.index),
			KeySchema: []types.KeySchemaElement{
				{AttributeName: aws.String(sc.shard), KeyType: types.KeyTypeHash},
				{AttributeName: aws.String(sc.lease), KeyType: types.KeyTypeRange},
			},
			Projection: &types.Projection{
				ProjectionType:   types.ProjectionTypeInclude,
				NonKeyAttributes: sc.projectedKeys,
			},
		}},
	})
	if err != nil {
		t.Fatalf("create table %s: %v", name, err)
	}
	// The server creates tables asynchronously, even with --createTableMs 0.
	w := dynamodb.NewTableExistsWaiter(c, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay, o.MaxDelay = 10*time.Millisecond, 200*time.Millisecond
	})
	if err := w.Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)}, time.Minute); err != nil {
		t.Fatalf("wait for table %s: %v", name, err)
	}
	t.Cleanup(func() {
		_, _ = c.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(name)})
	})
}

// callCounter is an SDK middleware that counts the DynamoDB operations a
// client makes (one per API call, retries not included) and whether a
// conditional-check failure carried the old item (ALL_OLD).
type callCounter struct {
	mu        sync.Mutex
	ops       []string
	withItem  int // ConditionalCheckFailed responses that carried the item
	withoutIt int // ... that did not
}

// option returns the client option that installs the counter.
func (c *callCounter) option() func(*dynamodb.Options) {
	return func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
			return st.Initialize.Add(middleware.InitializeMiddlewareFunc("countCalls",
				func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
					out, md, err := next.HandleInitialize(ctx, in)
					c.mu.Lock()
					defer c.mu.Unlock()
					c.ops = append(c.ops, awsmiddleware.GetOperationName(ctx))
					var ccf *types.ConditionalCheckFailedException
					if errors.As(err, &ccf) {
						if len(ccf.Item) > 0 {
							c.withItem++
						} else {
							c.withoutIt++
						}
					}
					return out, md, err
				}), middleware.After)
		})
	}
}

// reset forgets everything counted so far.
func (c *callCounter) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ops, c.withItem, c.withoutIt = nil, 0, 0
}

// snapshot returns the operations counted so far and how many conditional
// failures came without the old item.
func (c *callCounter) snapshot() (ops []string, withoutItem int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.ops...), c.withoutIt
}

// rig is one test table on the test endpoint, with a counted client.
type rig struct {
	client  *dynamodb.Client
	calls   *callCounter
	table   string
	classic bool // the table is classic (ClassicTableInput), not keyed by reference
}

// newRig creates a table with the deployed schema (template.yaml), keyed by
// reference.
func newRig(t testing.TB) *rig {
	t.Helper()
	calls := &callCounter{}
	client := testClient(t, calls.option())
	table := dynamotest.CreateTables(t, client, "IdempotencyTable")["IdempotencyTable"]
	return &rig{client: client, calls: calls, table: table}
}

// newClassicRig creates a classic table (ClassicTableInput), the schema of
// versions before v0.2.0.
func newClassicRig(t testing.TB) *rig {
	t.Helper()
	calls := &callCounter{}
	client := testClient(t, calls.option())
	name := dynamotest.UniqueName("classic")
	createClassicTable(t, client, name)
	return &rig{client: client, calls: calls, table: name, classic: true}
}

// rigs returns a rig of each key schema, by name, for tests that run on
// both.
func rigs(t testing.TB) map[string]*rig {
	return map[string]*rig{"byref": newRig(t), "classic": newClassicRig(t)}
}

// schemaTable creates a table of the template (keyed by reference), or a
// classic one, and returns its name.
func schemaTable(t testing.TB, c *dynamodb.Client, classic bool) string {
	t.Helper()
	if !classic {
		return dynamotest.CreateTables(t, c, "IdempotencyTable")["IdempotencyTable"]
	}
	name := dynamotest.UniqueName("classic")
	createClassicTable(t, c, name)
	return name
}

// schemas names the key schemas the tables of schemaTable have.
var schemas = []struct {
	name    string
	classic bool
}{{"byref", false}, {"classic", true}}

// createClassicTable creates a classic table named name and deletes it
// when the test ends.
func createClassicTable(t testing.TB, c *dynamodb.Client, name string) {
	t.Helper()
	ctx := context.Background()
	if _, err := c.CreateTable(ctx, dynamostore.ClassicTableInput(name)); err != nil {
		t.Fatalf("create table %s: %v", name, err)
	}
	t.Cleanup(func() {
		_, _ = c.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(name)})
	})
	w := dynamodb.NewTableExistsWaiter(c, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay, o.MaxDelay = 10*time.Millisecond, 200*time.Millisecond
	})
	if err := w.Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)}, time.Minute); err != nil {
		t.Fatalf("wait for table %s: %v", name, err)
	}
}

// key returns the primary key of the record of key on the rig's table,
// with the default attribute names.
func (r *rig) key(key string) map[string]types.AttributeValue {
	if r.classic {
		return map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: key}}
	}
	return map[string]types.AttributeValue{
		"ref": &types.AttributeValueMemberS{Value: dedupe.KeyRef(key)},
		"pk":  &types.AttributeValueMemberS{Value: dynamostore.SortKeyValue(key)},
	}
}

// store returns a store on the rig's table; opts.Table is filled in.
func (r *rig) store(t testing.TB, opts dynamostore.Options) *dynamostore.Store {
	t.Helper()
	opts.Table = r.table
	s, err := dynamostore.New(r.client, opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s
}

// rawItem reads the stored item for pk with a consistent GetItem.
func (r *rig) rawItem(t testing.TB, pk string) map[string]types.AttributeValue {
	t.Helper()
	out, err := r.client.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName:      aws.String(r.table),
		Key:            r.key(pk),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		t.Fatalf("GetItem %q: %v", pk, err)
	}
	return out.Item
}

// faultClient passes calls through to Client unless fail returns an error
// for the operation, which it then returns instead. It is for fault
// injection only.
type faultClient struct {
	dynamostore.Client
	fail func(op string) error
}

func (f faultClient) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	if err := f.fail("PutItem"); err != nil {
		return nil, err
	}
	return f.Client.PutItem(ctx, in, o...)
}

func (f faultClient) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	if err := f.fail("GetItem"); err != nil {
		return nil, err
	}
	return f.Client.GetItem(ctx, in, o...)
}

func (f faultClient) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if err := f.fail("UpdateItem"); err != nil {
		return nil, err
	}
	return f.Client.UpdateItem(ctx, in, o...)
}

func (f faultClient) Query(ctx context.Context, in *dynamodb.QueryInput, o ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	if err := f.fail("Query"); err != nil {
		return nil, err
	}
	return f.Client.Query(ctx, in, o...)
}

// listingBudget bounds the Queries and Scans of each test client of this
// package: far more than any test makes (246 at most, on 2026-12-03:
// TestLongKeysKeyedByReference), so that a listing that never ends fails
// its test in seconds instead of hanging the package's tests.
const listingBudget = 5000

// testClient is dynamotest.Client with the package's listing budget when t
// is a test. A benchmark's client has none: its listings grow with b.N
// (BenchmarkReap's, DefaultShards per iteration), and make mutate, whose
// looping mutants the budget is for, runs no benchmark.
func testClient(t testing.TB, optFns ...func(*dynamodb.Options)) *dynamodb.Client {
	t.Helper()
	if _, ok := t.(*testing.B); ok {
		return dynamotest.Client(t, optFns...)
	}
	return dynamotest.Client(t, append([]func(*dynamodb.Options){dynamotest.WithListingBudget(t, listingBudget)}, optFns...)...)
}
