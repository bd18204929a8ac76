package payments

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// DynamoClient is the subset of *dynamodb.Client that DynamoRepository
// calls.
type DynamoClient interface {
	PutItem(ctx context.Context, params *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	GetItem(ctx context.Context, params *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	Scan(ctx context.Context, params *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
}

var _ DynamoClient = (*dynamodb.Client)(nil)

// DynamoRepository is a Repository on the payments table of template.yaml:
// partition key id (S); attributes amount (N), currency, source, status
// (S), created (S, RFC 3339 with milliseconds) and owner (S; absent on
// rows written before payments had owners, which no caller can read).
//
// List is a paginated Scan filtered by owner: fine for a demo, not for a
// large table (a real API would Query an index on owner). Its cursor is
// the last key read, base64url-encoded.
type DynamoRepository struct {
	client DynamoClient
	table  string
}

var _ Repository = (*DynamoRepository)(nil)

// NewDynamoRepository returns a Repository on table through client.
func NewDynamoRepository(client DynamoClient, table string) *DynamoRepository {
	return &DynamoRepository{client: client, table: table}
}

// createdLayout is how Created is stored: sortable, millisecond precision.
const createdLayout = "2006-01-02T15:04:05.000Z07:00"

// paymentItem is a payment as the payments table stores it, encoded and
// decoded with attributevalue: id, currency, source and status (S), amount
// (N) and created (S, createdLayout: sortable, unlike the RFC 3339 with
// variable fraction that attributevalue writes for a time.Time).
type paymentItem struct {
	ID       string `dynamodbav:"id"`
	Amount   int64  `dynamodbav:"amount"`
	Currency string `dynamodbav:"currency"`
	Source   string `dynamodbav:"source"`
	Status   Status `dynamodbav:"status"`
	Created  string `dynamodbav:"created"`
	Owner    string `dynamodbav:"owner,omitempty"`
}

// Put implements Repository with a PutItem that never overwrites.
func (r *DynamoRepository) Put(ctx context.Context, p Payment) (Payment, error) {
	item, err := attributevalue.MarshalMap(paymentItem{
		ID: p.ID, Amount: p.Amount, Currency: p.Currency, Source: p.Source, Status: p.Status,
		Created: p.Created.UTC().Format(createdLayout), Owner: p.Owner,
	})
	if err != nil {
		return Payment{}, fmt.Errorf("put payment %s: %w", p.ID, err)
	}
	_, err = r.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:           aws.String(r.table),
		Item:                item,
		ConditionExpression: aws.String("attribute_not_exists(id)"),
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		// Already stored: ours (a retried write) or a clash.
		got, gerr := r.Get(ctx, p.ID)
		if gerr != nil {
			return Payment{}, fmt.Errorf("put payment %s: exists, and reading it failed: %w", p.ID, gerr)
		}
		if !samePayment(got, p) {
			return Payment{}, fmt.Errorf("put payment %s: %w", p.ID, ErrConflict)
		}
		return got, nil
	}
	if err != nil {
		return Payment{}, fmt.Errorf("put payment %s: %w", p.ID, err)
	}
	return p, nil
}

// samePayment reports whether two payments record the same charge; the
// creation times of two attempts differ.
func samePayment(a, b Payment) bool {
	return a.ID == b.ID && a.Owner == b.Owner && a.Amount == b.Amount && a.Currency == b.Currency && a.Source == b.Source && a.Status == b.Status
}

// Get implements Repository with a strongly consistent GetItem.
func (r *DynamoRepository) Get(ctx context.Context, id string) (Payment, error) {
	if id == "" {
		return Payment{}, fmt.Errorf("get payment %q: %w", id, ErrNotFound)
	}
	out, err := r.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(r.table),
		Key:            map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: id}},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return Payment{}, fmt.Errorf("get payment %s: %w", id, err)
	}
	if out.Item == nil {
		return Payment{}, fmt.Errorf("get payment %s: %w", id, ErrNotFound)
	}
	return decodePayment(out.Item)
}

// List implements Repository with one Scan page, filtered by owner.
func (r *DynamoRepository) List(ctx context.Context, owner string, limit int, cursor string) ([]Payment, string, error) {
	in := &dynamodb.ScanInput{
		TableName:                 aws.String(r.table),
		Limit:                     aws.Int32(int32(limit)),
		ConsistentRead:            aws.Bool(true),
		FilterExpression:          aws.String("#owner = :owner"),
		ExpressionAttributeNames:  map[string]string{"#owner": "owner"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":owner": &types.AttributeValueMemberS{Value: owner}},
	}
	if cursor != "" {
		id, err := base64.RawURLEncoding.DecodeString(cursor)
		if err != nil || len(id) == 0 {
			return nil, "", fmt.Errorf("list payments: %w", ErrInvalidCursor)
		}
		in.ExclusiveStartKey = map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: string(id)}}
	}
	if owner == "" {
		return nil, "", nil // an empty owner owns nothing
	}
	out, err := r.client.Scan(ctx, in)
	if err != nil {
		return nil, "", fmt.Errorf("list payments: %w", err)
	}
	page := make([]Payment, 0, len(out.Items))
	for _, item := range out.Items {
		p, err := decodePayment(item)
		if err != nil {
			return nil, "", err
		}
		page = append(page, p)
	}
	var next string
	if id, ok := out.LastEvaluatedKey["id"].(*types.AttributeValueMemberS); ok {
		next = base64.RawURLEncoding.EncodeToString([]byte(id.Value))
	}
	return page, next, nil
}

// decodePayment reads a payment item. Every attribute must be present
// with its type: attributevalue alone would leave a missing one zero.
func decodePayment(item map[string]types.AttributeValue) (Payment, error) {
	var errs []error
	for _, name := range [...]string{"id", "amount", "currency", "source", "status", "created"} {
		if _, ok := item[name]; !ok {
			errs = append(errs, fmt.Errorf("attribute %s: missing", name))
		}
	}
	var it paymentItem
	if err := attributevalue.UnmarshalMap(item, &it); err != nil {
		errs = append(errs, err)
	}
	created, err := time.Parse(createdLayout, it.Created)
	if err != nil && len(errs) == 0 {
		errs = append(errs, fmt.Errorf("attribute created: %w", err))
	}
	if err := errors.Join(errs...); err != nil {
		id, _ := item["id"].(*types.AttributeValueMemberS)
		var idv string
		if id != nil {
			idv = id.Value
		}
		return Payment{}, fmt.Errorf("decode payment %q: %w", idv, err)
	}
	return Payment{ID: it.ID, Amount: it.Amount, Currency: it.Currency, Source: it.Source, Status: it.Status, Created: created.UTC(), Owner: it.Owner}, nil
}
