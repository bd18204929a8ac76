package capacity

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambda-dedupe/dedupe/pkg/dynamostore"
)

// Units are capacity units consumed.
type Units struct {
	// Read is read units (0.5 per eventually consistent 4 KB).
	Read float64
	// Write is write units on the table.
	Write float64
	// IndexWrite is write units on global secondary indexes.
	IndexWrite float64
}

// Add returns u + v.
func (u Units) Add(v Units) Units {
	return Units{Read: u.Read + v.Read, Write: u.Write + v.Write, IndexWrite: u.IndexWrite + v.IndexWrite}
}

// Div returns u divided by n.
func (u Units) Div(n int) Units {
	f := float64(n)
	return Units{Read: u.Read / f, Write: u.Write / f, IndexWrite: u.IndexWrite / f}
}

// Index describes a global secondary index of the table.
type Index struct {
	// PartitionKey and SortKey are the index's key attributes (SortKey
	// empty: none).
	PartitionKey, SortKey string
	// Projected are the non-key attributes the index projects
	// (ProjectionType INCLUDE).
	Projected []string
}

// Schema is what a Meter knows of the table.
type Schema struct {
	// Keys are the table's primary key attributes.
	Keys []string
	// Indexes are its global secondary indexes.
	Indexes []Index
}

// DefaultSchema is template.yaml's idempotency table, keyed by reference
// (dynamostore.TableInput): key ref and pk, index inflight
// (inflight_shard, lease_expires_at; projecting owner, status,
// created_at, long_key).
func DefaultSchema() Schema {
	ix := inflightIndex()
	ix.Projected = append(ix.Projected, "long_key")
	return Schema{Keys: []string{"ref", "pk"}, Indexes: []Index{ix}}
}

// ClassicSchema is the classic idempotency table
// (dynamostore.ClassicTableInput): key pk, index inflight, and index ref
// (ref, KEYS_ONLY).
func ClassicSchema() Schema {
	return Schema{Keys: []string{"pk"}, Indexes: []Index{inflightIndex(), {
		PartitionKey: "ref", // KEYS_ONLY
	}}}
}

func inflightIndex() Index {
	return Index{PartitionKey: "inflight_shard", SortKey: "lease_expires_at", Projected: []string{"owner", "status", "created_at"}}
}

// Meter is a dynamostore.Client that passes every call to the client it
// wraps and adds up the capacity units each would consume on DynamoDB.
// Its methods are safe for concurrent use, but its figures are exact
// only for calls made one at a time.
type Meter struct {
	c      dynamostore.Client
	schema Schema
	// allOld attaches the existing item to a failed conditional write
	// that asked for it (ReturnValuesOnConditionCheckFailure ALL_OLD)
	// when the server did not, as DynamoDB does.
	allOld bool

	mu    sync.Mutex
	units Units
	calls int
}

var _ dynamostore.Client = (*Meter)(nil)

// New returns a Meter over c for a table of schema. With allOld, a failed
// conditional write that asked for the existing item gets it even from a
// server that ignores ReturnValuesOnConditionCheckFailure (dynalite), so
// that the store makes the calls it makes on DynamoDB.
func New(c dynamostore.Client, schema Schema, allOld bool) *Meter {
	return &Meter{c: c, schema: schema, allOld: allOld}
}

// Calls returns the calls passed on since the last Reset.
func (m *Meter) Calls() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.calls
}

// Units returns the units counted since the last Reset.
func (m *Meter) Units() Units {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.units
}

// Reset sets the counts to zero.
func (m *Meter) Reset() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.units = Units{}
	m.calls = 0
}

func (m *Meter) add(u Units) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.units = m.units.Add(u)
}

// call counts one call passed on.
func (m *Meter) call() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls++
}

// current reads the item with key from table, uncounted.
func (m *Meter) current(ctx context.Context, table *string, key map[string]types.AttributeValue) (map[string]types.AttributeValue, error) {
	out, err := m.c.GetItem(ctx, &dynamodb.GetItemInput{TableName: table, Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, err
	}
	return out.Item, nil
}

// keyOf returns the primary key attributes of item.
func (m *Meter) keyOf(item map[string]types.AttributeValue) map[string]types.AttributeValue {
	k := make(map[string]types.AttributeValue, len(m.schema.Keys))
	for _, n := range m.schema.Keys {
		k[n] = item[n]
	}
	return k
}

// write returns the units of a write that turned before into after.
func (m *Meter) write(before, after map[string]types.AttributeValue) Units {
	u := Units{Write: float64(dynamostore.WriteUnits(max(dynamostore.ItemSize(before), dynamostore.ItemSize(after))))}
	for _, ix := range m.schema.Indexes {
		u.IndexWrite += float64(m.indexWrites(ix, before, after))
	}
	return u
}

// failed returns the units of a conditional write that failed on
// existing, when it would have written proposed: one unit per started KB
// of the larger of the two, at least one. No index is written.
func failed(existing, proposed map[string]types.AttributeValue) Units {
	return Units{Write: float64(dynamostore.WriteUnits(max(dynamostore.ItemSize(existing), dynamostore.ItemSize(proposed))))}
}

// entry returns item's entry in ix, or nil when item is not in it.
func (m *Meter) entry(ix Index, item map[string]types.AttributeValue) map[string]types.AttributeValue {
	if item == nil || item[ix.PartitionKey] == nil || (ix.SortKey != "" && item[ix.SortKey] == nil) {
		return nil
	}
	e := m.keyOf(item)
	for _, n := range append([]string{ix.PartitionKey, ix.SortKey}, ix.Projected...) {
		if v, ok := item[n]; ok && n != "" {
			e[n] = v
		}
	}
	return e
}

// indexWrites returns the write units of ix for a write from before to
// after.
func (m *Meter) indexWrites(ix Index, before, after map[string]types.AttributeValue) int {
	b, a := m.entry(ix, before), m.entry(ix, after)
	switch {
	case b == nil && a == nil:
		return 0
	case b == nil:
		return dynamostore.WriteUnits(dynamostore.ItemSize(a))
	case a == nil:
		return dynamostore.WriteUnits(dynamostore.ItemSize(b))
	case !reflect.DeepEqual(b[ix.PartitionKey], a[ix.PartitionKey]) || (ix.SortKey != "" && !reflect.DeepEqual(b[ix.SortKey], a[ix.SortKey])):
		return dynamostore.WriteUnits(dynamostore.ItemSize(b)) + dynamostore.WriteUnits(dynamostore.ItemSize(a))
	case !reflect.DeepEqual(b, a):
		return dynamostore.WriteUnits(max(dynamostore.ItemSize(b), dynamostore.ItemSize(a)))
	}
	return 0
}

// PutItem passes the call on and counts it.
func (m *Meter) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	before, err := m.current(ctx, in.TableName, m.keyOf(in.Item))
	if err != nil {
		return m.c.PutItem(ctx, in, o...)
	}
	m.call()
	out, err := m.c.PutItem(ctx, in, o...)
	var ccf *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &ccf):
		m.add(failed(before, in.Item))
		if m.allOld && len(ccf.Item) == 0 && len(before) > 0 && in.ReturnValuesOnConditionCheckFailure == types.ReturnValuesOnConditionCheckFailureAllOld {
			ccf.Item = before
		}
	case err == nil:
		m.add(m.write(before, in.Item))
	}
	return out, err
}

// UpdateItem passes the call on and counts it.
func (m *Meter) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	before, err := m.current(ctx, in.TableName, in.Key)
	if err != nil {
		return m.c.UpdateItem(ctx, in, o...)
	}
	m.call()
	out, err := m.c.UpdateItem(ctx, in, o...)
	var ccf *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &ccf):
		m.add(failed(before, applyUpdate(before, m.keyOf(in.Key), in)))
		if m.allOld && len(ccf.Item) == 0 && len(before) > 0 && in.ReturnValuesOnConditionCheckFailure == types.ReturnValuesOnConditionCheckFailureAllOld {
			ccf.Item = before
		}
	case err == nil:
		after, gerr := m.current(ctx, in.TableName, in.Key)
		if gerr == nil {
			m.add(m.write(before, after))
		}
	}
	return out, err
}

// GetItem passes the call on and counts it.
func (m *Meter) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	m.call()
	out, err := m.c.GetItem(ctx, in, o...)
	if err == nil {
		u := float64(dynamostore.ReadUnits(dynamostore.ItemSize(out.Item)))
		if !aws.ToBool(in.ConsistentRead) {
			u /= 2
		}
		m.add(Units{Read: u})
	}
	return out, err
}

// Query passes the call on and counts it: the items' total size, rounded
// up to 4 KB, halved unless the read is strongly consistent.
func (m *Meter) Query(ctx context.Context, in *dynamodb.QueryInput, o ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	m.call()
	out, err := m.c.Query(ctx, in, o...)
	if err == nil {
		size := 0
		for _, it := range out.Items {
			size += dynamostore.ItemSize(it)
		}
		u := float64(dynamostore.ReadUnits(size))
		if !aws.ToBool(in.ConsistentRead) {
			u /= 2
		}
		m.add(Units{Read: u})
	}
	return out, err
}

// DeleteItem passes the call on, when the wrapped client has DeleteItem
// (dynamostore.Deleter), and counts it: the deleted item's size, as a
// write (at least one unit), and the index entries it takes out.
func (m *Meter) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, o ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	del, ok := m.c.(dynamostore.Deleter)
	if !ok {
		return nil, fmt.Errorf("capacity: client %T has no DeleteItem", m.c)
	}
	before, err := m.current(ctx, in.TableName, in.Key)
	if err != nil {
		return del.DeleteItem(ctx, in, o...)
	}
	m.call()
	out, err := del.DeleteItem(ctx, in, o...)
	var ccf *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &ccf):
		m.add(failed(before, nil))
	case err == nil:
		m.add(m.write(before, nil))
	}
	return out, err
}

// DescribeTable passes the call on; it consumes no capacity.
func (m *Meter) DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, o ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	return m.c.DescribeTable(ctx, in, o...)
}

// applyUpdate returns the item an UpdateItem would leave from before, for
// the forms of update expression the store writes: SET of #name = :value
// or #name = if_not_exists(#name, :value), and REMOVE of #names. It is
// what a failed update would have written, which DynamoDB charges when it
// is larger than the existing item. A clause of another form leaves its
// attribute as it was (the estimate is then low, never high).
func applyUpdate(before, key map[string]types.AttributeValue, in *dynamodb.UpdateItemInput) map[string]types.AttributeValue {
	after := make(map[string]types.AttributeValue, len(before)+len(key))
	for k, v := range before {
		after[k] = v
	}
	for k, v := range key {
		after[k] = v
	}
	name := func(n string) string {
		if a, ok := in.ExpressionAttributeNames[n]; ok {
			return a
		}
		return n
	}
	expr := " " + aws.ToString(in.UpdateExpression)
	set, remove := expr, ""
	if i := strings.Index(expr, " REMOVE "); i >= 0 {
		set, remove = expr[:i], expr[i+len(" REMOVE "):]
	}
	set = strings.TrimPrefix(strings.TrimSpace(set), "SET ")
	for _, clause := range splitTop(set) {
		lhs, rhs, ok := strings.Cut(clause, "=")
		if !ok {
			continue
		}
		n, rhs := name(strings.TrimSpace(lhs)), strings.TrimSpace(rhs)
		if inner, ok := strings.CutPrefix(rhs, "if_not_exists("); ok {
			path, val, _ := strings.Cut(strings.TrimSuffix(inner, ")"), ",")
			if _, exists := before[name(strings.TrimSpace(path))]; exists {
				continue
			}
			rhs = strings.TrimSpace(val)
		}
		if v, ok := in.ExpressionAttributeValues[rhs]; ok {
			after[n] = v
		}
	}
	for _, n := range splitTop(remove) {
		delete(after, name(strings.TrimSpace(n)))
	}
	return after
}

// splitTop splits s at the commas outside parentheses.
func splitTop(s string) []string {
	var out []string
	depth, start := 0, 0
	for i, r := range s {
		switch r {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	if strings.TrimSpace(s[start:]) != "" {
		out = append(out, s[start:])
	}
	return out
}
