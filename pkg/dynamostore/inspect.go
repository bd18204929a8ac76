package dynamostore

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
)

// Object names the S3 object in which LargeResults keeps the response
// body of a completed record.
type Object struct {
	// Bucket and Name locate the object.
	Bucket, Name string
	// Size is the object's length in bytes: the body as stored,
	// gzip-compressed when Encoding is EncodingGzip.
	Size int64
	// Encoding is how the body is stored: EncodingGzip, or
	// EncodingIdentity (also when empty).
	Encoding string
}

// Inspected is a record as Inspect reads it: the record, and the object
// that holds its response body when that is in S3.
type Inspected struct {
	dedupe.Record
	// Object names the S3 object that holds the body of Record.Result,
	// whose Body is then nil (its status and headers are there); nil when
	// the body, if any, is in the item.
	Object *Object
	// BodyErr is why the body of Record.Result, kept in an item of its
	// own (see BodyItemKey), could not be read: Result.Body is then nil
	// (its status and headers are there). Nil when it was read, or when
	// the body is elsewhere.
	BodyErr error
}

// Inspect returns the live record for key at now as Get does, except
// that it never reads S3: a response body that LargeResults keeps in an
// object is named (Inspected.Object), not read, so it needs neither
// LargeResults nor s3:GetObject, and an object that is missing or
// unreadable does not hide the record. It costs one strongly consistent
// GetItem, and a second for a body kept in an item of its own (one that
// cannot be read does not hide the record either: Inspected.BodyErr). It
// is for operators' tools (dedupe show, forget); the guard
// never calls it. To read the body, Get the key from a store whose
// LargeResults.Bucket is Object.Bucket: Get checks the object's size and
// SHA-256 against the record.
func (s *Store) Inspect(ctx context.Context, key string, now time.Time) (Inspected, error) {
	if err := dedupe.CheckStoreKey(key); err != nil {
		return Inspected{}, fmt.Errorf("dynamostore: inspect: %w", err)
	}
	if err := s.checked(ctx); err != nil {
		return Inspected{}, fmt.Errorf("dynamostore: inspect %s: %w", dedupe.KeyRef(key), err)
	}
	rec, found, err := s.inspect(ctx, key)
	switch {
	case err != nil:
		return Inspected{}, err
	case !found:
		return Inspected{}, fmt.Errorf("dynamostore: inspect %s: %w", dedupe.KeyRef(key), dedupe.ErrNotFound)
	case rec.Expired(now):
		return Inspected{}, fmt.Errorf("dynamostore: inspect %s: expired: %w", dedupe.KeyRef(key), dedupe.ErrNotFound)
	}
	return rec, nil
}

// InspectRef is FindRef through Inspect: every live record at now whose
// key's KeyRef is ref, with the object of each result kept in S3 named,
// not read. It costs what FindRef costs, without S3 calls.
func (s *Store) InspectRef(ctx context.Context, ref string, now time.Time) ([]Inspected, error) {
	keys, err := s.refKeys(ctx, ref)
	if err != nil {
		return nil, err
	}
	var out []Inspected
	for _, key := range keys {
		rec, found, err := s.inspect(ctx, key)
		switch {
		case err != nil:
			return nil, err
		case found && !rec.Expired(now):
			out = append(out, rec)
		}
	}
	return out, nil
}

// inspect reads the item for key with a strongly consistent GetItem and
// decodes it without the body of an S3 object.
func (s *Store) inspect(ctx context.Context, key string) (Inspected, bool, error) {
	out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(s.table),
		Key:            s.key(key),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return Inspected{}, false, wrapErr("inspect", key, err)
	}
	if len(out.Item) == 0 {
		return Inspected{}, false, nil
	}
	rec, err := s.decodeInspected(ctx, key, out.Item)
	if err != nil {
		return Inspected{}, false, fmt.Errorf("dynamostore: inspect %s: %w", dedupe.KeyRef(key), err)
	}
	return rec, true, nil
}

// decodeInspected decodes item; a body kept in an object is decoded as
// an empty one, and the object returned beside the record; a body kept in
// a body item is read, and when it cannot be, decoded as an empty one
// with the read's error beside the record.
func (s *Store) decodeInspected(ctx context.Context, key string, item map[string]types.AttributeValue) (Inspected, error) {
	a := s.attr
	if _, ok := item[a.ResItem]; ok {
		// A body in its own item is read (a strongly consistent GetItem
		// of the table); one that cannot be does not hide the record.
		rec, err := s.decodeItem(item, nil, func(token string, ref itemRef) ([]byte, error) { return s.fetchBody(ctx, "inspect", key, token, ref) })
		if err == nil || rec.Key == "" {
			return Inspected{Record: rec}, err
		}
		rest := maps.Clone(item)
		delete(rest, a.ResItem)
		delete(rest, a.ResEncoding)
		if rec, derr := s.decode(rest); derr == nil && rec.Result != nil {
			rec.Result.Body = nil
			return Inspected{Record: rec, BodyErr: err}, nil
		}
		return Inspected{}, err
	}
	v, ok := item[a.ResObject]
	if !ok {
		rec, err := s.decode(item)
		return Inspected{Record: rec}, err
	}
	ref, err := decodeObjectRef(v)
	if err != nil {
		return Inspected{}, fmt.Errorf("%w: attribute %q: %v", ErrMalformedItem, a.ResObject, err)
	}
	obj := &Object{Bucket: ref.bucket, Name: ref.name, Size: ref.size}
	if e, ok := item[a.ResEncoding].(*types.AttributeValueMemberS); ok {
		obj.Encoding = e.Value
	}
	// The item without the object's reference and the body's encoding
	// decodes as a result with an empty body.
	rest := maps.Clone(item)
	delete(rest, a.ResObject)
	delete(rest, a.ResEncoding)
	rec, err := s.decode(rest)
	if err != nil {
		return Inspected{}, err
	}
	if rec.Result == nil {
		obj = nil // omitted or in flight: no body to name
	}
	return Inspected{Record: rec, Object: obj}, nil
}
