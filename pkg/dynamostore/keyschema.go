package dynamostore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
)

// KeySchema says how the table's primary key is built from a store key.
// The zero value, KeySchemaDetect, reads it from the table.
//
// A table keyed by reference (KeySchemaByRef, the schema of TableInput and
// template.yaml) has the partition key Attributes.Ref, which holds
// dedupe.KeyRef of the stored key, and the sort key
// Attributes.PartitionKey, which holds the stored key: an operator finds a
// record from a log line with a strongly consistent Query of the table,
// and no index on ref is written (one write unit less per fresh request,
// see docs/cost.md). A classic table (KeySchemaClassic, ClassicTableInput)
// has the partition key Attributes.PartitionKey alone (or with the fixed
// Options.SortKey of a single-table design), and FindRef queries the
// KEYS_ONLY index Options.RefIndex.
//
// DynamoDB limits a sort key to 1024 bytes. On a table keyed by
// reference, a stored key longer than MaxPlainSortKey bytes is kept in
// Attributes.PartitionKey shortened (its first bytes, then "#sha256:" and
// the hex SHA-256 of the whole key: 1021 to 1024 bytes, so never equal to
// a key kept as it is), and in full in Attributes.LongKey; records carry
// the full key either way.
//
// A store whose requests use the wrong key shape never reaches an item:
// DynamoDB refuses each with a ValidationException, which the store
// reports as a failure, never as dedupe.ErrStoreUnavailable (so
// Config.FailOpen never runs the work on it). The store never guesses:
// see KeySchemaDetect.
type KeySchema int

const (
	// KeySchemaDetect makes New read the table's key schema with the
	// DescribeTable of its global-table check (Options.GlobalTables):
	// HASH Attributes.PartitionKey alone (with RANGE Options.SortKey.Name
	// when SortKey is set) is classic; HASH Attributes.Ref with RANGE
	// Attributes.PartitionKey is keyed by reference; anything else, or a
	// key attribute the table defines as other than a string (S), is
	// refused (ErrInvalidOptions) naming what was found and what is
	// expected. When that DescribeTable fails transiently, every call of
	// the store fails with dedupe.ErrStoreUnavailable until it succeeds:
	// no call goes out with a guessed key shape. With
	// GlobalTablesUnchecked, which calls nothing, New refuses it: set
	// KeySchemaByRef or KeySchemaClassic.
	KeySchemaDetect KeySchema = iota
	// KeySchemaByRef states that the table is keyed by reference. When
	// New calls DescribeTable (every GlobalTables mode but
	// GlobalTablesUnchecked), a table found otherwise is refused.
	// Options.SortKey and Options.RefIndex are refused with it.
	KeySchemaByRef
	// KeySchemaClassic states that the table is classic, as
	// KeySchemaByRef does.
	KeySchemaClassic
)

// String returns the constant's name.
func (k KeySchema) String() string {
	switch k {
	case KeySchemaDetect:
		return "KeySchemaDetect"
	case KeySchemaByRef:
		return "KeySchemaByRef"
	case KeySchemaClassic:
		return "KeySchemaClassic"
	}
	return fmt.Sprintf("KeySchema(%d)", int(k))
}

// MaxPlainSortKey is the longest stored key a table keyed by reference
// keeps as it is in its sort key; longer ones are shortened there (see
// KeySchema). It leaves DynamoDB's 1024-byte sort key limit room for the
// shortened forms, which are longer than it.
const MaxPlainSortKey = 1020

// shortPrefix is how much of a long key its shortened sort key keeps.
const shortPrefix = 1024 - len("#sha256:") - 2*sha256.Size

// sortKeyValue returns what a table keyed by reference holds in its sort
// key for key: key itself up to MaxPlainSortKey bytes, else its first
// bytes (up to shortPrefix, cut at a UTF-8 boundary), "#sha256:" and the
// hex SHA-256 of key, 1021 to 1024 bytes: injective, since every
// shortened form is longer than every key kept as it is.
func sortKeyValue(key string) string {
	if len(key) <= MaxPlainSortKey {
		return key
	}
	cut := shortPrefix
	for cut > 0 && !utf8.RuneStart(key[cut]) {
		cut--
	}
	sum := sha256.Sum256([]byte(key))
	return key[:cut] + "#sha256:" + hex.EncodeToString(sum[:])
}

// byRef reports whether the store's table is keyed by reference. Only
// calls made after checked returned nil may ask.
func (s *Store) byRef() bool { return KeySchema(s.schema.Load()) == KeySchemaByRef }

// ref returns the reference stored with key: dedupe.KeyRef(key), unless
// a test forces references to collide (testHooks).
func (s *Store) ref(key string) string {
	if s.hooks != nil && s.hooks.refOf != nil {
		return s.hooks.refOf(key)
	}
	return dedupe.KeyRef(key)
}

// key returns the primary key attributes of key. Every call of the store
// runs checked first, so the schema is known here; were it not, the key
// would hold no attribute, which DynamoDB refuses (ValidationException)
// without touching an item.
func (s *Store) key(key string) map[string]types.AttributeValue {
	switch KeySchema(s.schema.Load()) {
	case KeySchemaByRef:
		return map[string]types.AttributeValue{s.attr.Ref: str(s.ref(key)), s.attr.PartitionKey: str(sortKeyValue(key))}
	case KeySchemaClassic:
		k := map[string]types.AttributeValue{s.attr.PartitionKey: str(key)}
		if s.sortKey.Name != "" {
			k[s.sortKey.Name] = str(s.sortKey.Value)
		}
		return k
	}
	return map[string]types.AttributeValue{}
}

// longKey returns the value of Attributes.LongKey for key: the key on a
// table keyed by reference whose sort key holds it shortened, else "".
func (s *Store) longKey(key string) string {
	if s.byRef() && len(key) > MaxPlainSortKey {
		return key
	}
	return ""
}

// storedKey returns the stored key of item, an item of the table, of an
// index or of a Query that holds the table's key attributes: its
// Attributes.LongKey when it has one, else its Attributes.PartitionKey,
// unless that is a shortened form (see KeySchema), whose full key is read
// with a strongly consistent GetItem of the item. found is false when
// that item is gone.
func (s *Store) storedKey(ctx context.Context, op string, item map[string]types.AttributeValue) (key string, found bool, err error) {
	a := s.attr
	d := decoder{item: item}
	key = d.str(a.PartitionKey, true)
	if d.err != nil {
		return "", false, d.err
	}
	if !s.byRef() || len(key) <= MaxPlainSortKey {
		return key, true, nil
	}
	if long, ok := item[a.LongKey]; ok {
		d := decoder{item: map[string]types.AttributeValue{a.LongKey: long}}
		key = d.str(a.LongKey, true)
		return key, d.err == nil, d.err
	}
	out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(s.table),
		Key:            map[string]types.AttributeValue{a.Ref: item[a.Ref], a.PartitionKey: item[a.PartitionKey]},
		ConsistentRead: aws.Bool(true),
		// The sort key too, so that an item without the full key is told
		// from one that is gone: malformed, never hidden.
		ProjectionExpression:     aws.String("#lk, #pk"),
		ExpressionAttributeNames: map[string]string{"#lk": a.LongKey, "#pk": a.PartitionKey},
	})
	if err != nil {
		return "", false, wrap("dynamostore: "+op+": read the full key of a shortened one", err)
	}
	if len(out.Item) == 0 {
		return "", false, nil
	}
	d = decoder{item: out.Item}
	key = d.str(a.LongKey, true)
	return key, d.err == nil, d.err
}

// judgeKeySchema returns the key schema of a table whose KeySchema is
// elems, as the store's attribute names and sort key read it, or
// ErrInvalidOptions naming what was found and what is expected.
func judgeKeySchema(table string, elems []types.KeySchemaElement, a Attributes, sk SortKey, want KeySchema) (KeySchema, error) {
	var hash, rng string
	var found []string
	for _, e := range elems {
		found = append(found, string(e.KeyType)+" "+fmt.Sprintf("%q", aws.ToString(e.AttributeName)))
		switch e.KeyType {
		case types.KeyTypeHash:
			hash = aws.ToString(e.AttributeName)
		case types.KeyTypeRange:
			rng = aws.ToString(e.AttributeName)
		}
	}
	classic := fmt.Sprintf("HASH %q alone (classic)", a.PartitionKey)
	if sk.Name != "" {
		classic = fmt.Sprintf("HASH %q and RANGE %q (classic, with Options.SortKey)", a.PartitionKey, sk.Name)
	}
	byRef := fmt.Sprintf("HASH %q and RANGE %q (keyed by reference)", a.Ref, a.PartitionKey)
	var got KeySchema
	switch {
	case len(elems) == 1 && hash == a.PartitionKey && sk.Name == "",
		len(elems) == 2 && hash == a.PartitionKey && sk.Name != "" && rng == sk.Name:
		got = KeySchemaClassic
	case len(elems) == 2 && hash == a.Ref && rng == a.PartitionKey && sk.Name == "":
		got = KeySchemaByRef
	case len(elems) == 2 && hash == a.Ref && rng == a.PartitionKey:
		return 0, fmt.Errorf("%w: table %q is keyed by reference (%s), where Options.SortKey %q means nothing: unset SortKey",
			ErrInvalidOptions, table, strings.Join(found, ", "), sk.Name)
	default:
		if len(found) == 0 {
			found = []string{"none (DescribeTable returned no KeySchema)"}
		}
		return 0, fmt.Errorf("%w: table %q has the key schema %s; the store expects %s or %s "+
			"(Options.Attributes names the attributes, Options.SortKey a fixed sort key)",
			ErrInvalidOptions, table, strings.Join(found, ", "), classic, byRef)
	}
	if want != KeySchemaDetect && want != got {
		return 0, fmt.Errorf("%w: Options.KeySchema is %v, but table %q is %v (%s): set KeySchema to %v, or leave it unset to read it from the table",
			ErrInvalidOptions, want, table, got, strings.Join(found, ", "), got)
	}
	return got, nil
}

// KeySchema returns the key schema of the store's table: KeySchemaByRef
// or KeySchemaClassic, or KeySchemaDetect while New's DescribeTable has
// not answered yet (see KeySchemaDetect).
func (s *Store) KeySchema() KeySchema { return KeySchema(s.schema.Load()) }

// checkKeyTypes returns ErrInvalidOptions when defs, the attribute
// definitions of a table whose KeySchema is elems, define a key attribute
// as anything but a string (S): the store writes every key attribute as
// one, so DynamoDB would refuse each of its calls. A key attribute defs
// leaves out (a stand-in's description) is not judged.
func checkKeyTypes(table string, elems []types.KeySchemaElement, defs []types.AttributeDefinition) error {
	for _, e := range elems {
		for _, d := range defs {
			if aws.ToString(d.AttributeName) == aws.ToString(e.AttributeName) && d.AttributeType != types.ScalarAttributeTypeS {
				return fmt.Errorf("%w: table %q defines its key attribute %q as %s, but the store writes it as a string (S): "+
					"create the table with TableInput or ClassicTableInput (template.yaml), whose key attributes are strings",
					ErrInvalidOptions, table, aws.ToString(e.AttributeName), d.AttributeType)
			}
		}
	}
	return nil
}
