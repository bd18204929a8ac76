package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
)

var _ dedupe.Admin = (*Store)(nil)

// Deleter is the method a Store's client needs for Forget, beside Client.
// A *dynamodb.Client has it; the deployed functions' roles may not.
type Deleter interface {
	DeleteItem(ctx context.Context, params *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
}

// putProvenance adds the ref of key, and the request ID and trace when
// set, to a claim's item. The ref costs one write to the KEYS_ONLY ref
// index per new item (1 WCU; later updates of the item leave the index
// alone, since its keys do not change).
func (s *Store) putProvenance(item map[string]types.AttributeValue, key, requestID, trace string) {
	a := s.attr
	item[a.Ref] = str(dedupe.KeyRef(key))
	if requestID != "" {
		item[a.RequestID] = str(requestID)
	}
	if trace != "" {
		item[a.Trace] = str(trace)
	}
}

// setProvenance extends Complete's update expression so that the record
// names the completing execution: it sets the request ID and trace, or
// removes the claim's when the completion carries none.
func (s *Store) setProvenance(set, remove string, names map[string]string, values map[string]types.AttributeValue, requestID, trace string) (string, string) {
	names["#rid"], names["#trace"] = s.attr.RequestID, s.attr.Trace
	if requestID != "" {
		set += ", #rid = :rid"
		values[":rid"] = str(requestID)
	} else {
		remove += ", #rid"
	}
	if trace != "" {
		set += ", #trace = :trace"
		values[":trace"] = str(trace)
	} else {
		remove += ", #trace"
	}
	return set, remove
}

// FindRef implements dedupe.Admin with one Query of the ref index
// (Options.RefIndex, KEYS_ONLY, eventually consistent: a record claimed
// in the last second may not show yet) and one strongly consistent
// GetItem per key found (one, unless references collide). It never scans
// the table. A table without the index fails with DynamoDB's
// ValidationException, wrapped.
func (s *Store) FindRef(ctx context.Context, ref string, now time.Time) ([]dedupe.Record, error) {
	if !dedupe.ValidRef(ref) {
		return nil, fmt.Errorf("dynamostore: find %q: not a key reference (key: and 12 hex digits)", ref)
	}
	if err := s.checked(ctx); err != nil {
		return nil, fmt.Errorf("dynamostore: find %s: %w", ref, err)
	}
	var out []dedupe.Record
	var start map[string]types.AttributeValue
	for {
		q, err := s.client.Query(ctx, &dynamodb.QueryInput{
			TableName:                 aws.String(s.table),
			IndexName:                 aws.String(s.refIndex),
			KeyConditionExpression:    aws.String("#ref = :ref"),
			ExpressionAttributeNames:  map[string]string{"#ref": s.attr.Ref},
			ExpressionAttributeValues: map[string]types.AttributeValue{":ref": str(ref)},
			ExclusiveStartKey:         start,
		})
		if err != nil {
			return nil, wrap(fmt.Sprintf("dynamostore: find %s in index %q", ref, s.refIndex), err)
		}
		for _, item := range q.Items {
			d := decoder{item: item}
			key := d.str(s.attr.PartitionKey, true)
			if d.err != nil {
				return nil, fmt.Errorf("dynamostore: find %s: %w", ref, d.err)
			}
			rec, found, err := s.read(ctx, "find", key)
			switch {
			case err != nil:
				return nil, err
			case found && !rec.Expired(now):
				out = append(out, rec)
			}
		}
		if len(q.LastEvaluatedKey) == 0 {
			return out, nil
		}
		start = q.LastEvaluatedKey
	}
}

// InFlight implements dedupe.Admin: one Query per shard of the sparse
// in-flight index (Options.Index), then one strongly consistent GetItem
// per record listed, up to limit. Released and retired records have left
// the index and are not listed.
//
// A Lean store refuses it with an error wrapping errors.ErrUnsupported:
// Lean writers leave no index entries, so an empty answer would hide
// every record in flight. Build the operator's store without Lean; it
// then lists the records of the writers that are not Lean.
func (s *Store) InFlight(ctx context.Context, now time.Time, limit int) ([]dedupe.Record, bool, error) {
	if s.lean {
		return nil, false, fmt.Errorf("dynamostore: in flight: the store is Lean, whose claims write no in-flight index entry, "+
			"so nothing in flight can be listed: build this store without Lean (it lists the records of writers that are not Lean): %w", errors.ErrUnsupported)
	}
	if err := s.checked(ctx); err != nil {
		return nil, false, fmt.Errorf("dynamostore: in flight: %w", err)
	}
	var out []dedupe.Record
	for shard := range s.shards {
		var start map[string]types.AttributeValue
		for {
			q, err := s.client.Query(ctx, &dynamodb.QueryInput{
				TableName:                 aws.String(s.table),
				IndexName:                 aws.String(s.index),
				KeyConditionExpression:    aws.String("#shard = :shard"),
				ExpressionAttributeNames:  map[string]string{"#shard": s.attr.InflightShard},
				ExpressionAttributeValues: map[string]types.AttributeValue{":shard": num(int64(shard))},
				ExclusiveStartKey:         start,
			})
			if err != nil {
				return nil, false, wrap(fmt.Sprintf("dynamostore: in flight: shard %d", shard), err)
			}
			for _, item := range q.Items {
				d := decoder{item: item}
				key := d.str(s.attr.PartitionKey, true)
				if d.err != nil {
					return nil, false, fmt.Errorf("dynamostore: in flight: shard %d: %w", shard, d.err)
				}
				rec, found, err := s.read(ctx, "in flight", key)
				if err != nil && rec.Key == "" {
					return nil, false, err
				}
				// (A record read with an error but a Key was completed
				// meanwhile and its body in S3 is unreadable: skipped
				// below, as every completed record is.)
				if !found || rec.Expired(now) || rec.Status != dedupe.StatusInProgress {
					continue
				}
				if len(out) == limit {
					return out, true, nil
				}
				out = append(out, rec)
			}
			if len(q.LastEvaluatedKey) == 0 {
				break
			}
			start = q.LastEvaluatedKey
		}
	}
	return out, false, nil
}

// Forget implements dedupe.Admin with one DeleteItem conditioned on
// owner = :token. The store's client must also be a Deleter.
func (s *Store) Forget(ctx context.Context, key, token string) error {
	if err := dedupe.CheckStoreKey(key); err != nil {
		return fmt.Errorf("dynamostore: forget: %w", err)
	}
	if err := s.checked(ctx); err != nil {
		return fmt.Errorf("dynamostore: forget %s: %w", dedupe.KeyRef(key), err)
	}
	// New wraps every client in a conflictRetrier, which is a Deleter
	// and refuses the call when the client it wraps has no DeleteItem.
	del, ok := s.client.(Deleter)
	if !ok {
		return fmt.Errorf("dynamostore: forget %s: client %T has no DeleteItem", dedupe.KeyRef(key), s.client)
	}
	_, err := del.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                           aws.String(s.table),
		Key:                                 s.key(key),
		ConditionExpression:                 aws.String("#owner = :tok"),
		ExpressionAttributeNames:            map[string]string{"#owner": s.attr.Owner},
		ExpressionAttributeValues:           map[string]types.AttributeValue{":tok": str(token)},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var ccf *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &ccf) && len(ccf.Item) == 0:
		// No item at all (or a server that does not return ALL_OLD):
		// tell the two apart with a read.
		if _, found, rerr := s.read(ctx, "forget", key); rerr == nil && !found {
			return fmt.Errorf("dynamostore: forget %s: %w", dedupe.KeyRef(key), dedupe.ErrNotFound)
		}
		return fmt.Errorf("dynamostore: forget %s: %w", dedupe.KeyRef(key), dedupe.ErrLeaseLost)
	case errors.As(err, &ccf):
		return fmt.Errorf("dynamostore: forget %s: %w", dedupe.KeyRef(key), dedupe.ErrLeaseLost)
	case err != nil:
		return wrapErr("forget", key, err)
	}
	return nil
}
