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
// set, to a claim's item. On a table keyed by reference the ref is the
// partition key (s.key set it already); on a classic one it costs one
// write to the KEYS_ONLY ref index per new item (1 WCU; later updates of
// the item leave the index alone, since its keys do not change).
func (s *Store) putProvenance(item map[string]types.AttributeValue, key, requestID, trace string) {
	a := s.attr
	item[a.Ref] = str(s.ref(key))
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

// FindRef implements dedupe.Admin with one Query and one strongly
// consistent GetItem per key found (one, unless references collide). On a
// table keyed by reference (KeySchemaByRef) the Query reads the table's
// partition ref, strongly consistent; on a classic table it reads the ref
// index (Options.RefIndex, KEYS_ONLY, eventually consistent: a record
// claimed in the last second may not show yet), and a table without the
// index fails with DynamoDB's ValidationException, wrapped. It never
// scans the table. A result kept in S3 is read as Get reads
// it; InspectRef names its object instead.
func (s *Store) FindRef(ctx context.Context, ref string, now time.Time) ([]dedupe.Record, error) {
	keys, err := s.refKeys(ctx, ref)
	if err != nil {
		return nil, err
	}
	var out []dedupe.Record
	for _, key := range keys {
		rec, found, err := s.read(ctx, "find", key)
		switch {
		case err != nil:
			return nil, err
		case found && !rec.Expired(now):
			out = append(out, rec)
		}
	}
	return out, nil
}

// refKeys returns the keys listed under ref, every page: on a table keyed
// by reference, by a strongly consistent Query of the table (body items,
// which carry no status, left out); on a classic one, by a Query of the
// ref index (with Options.SortKey, the items of its value only: a table
// shared by stores under other values lists their records too).
func (s *Store) refKeys(ctx context.Context, ref string) ([]string, error) {
	if !dedupe.ValidRef(ref) {
		return nil, fmt.Errorf("dynamostore: find %q: not a key reference (key: and 12 hex digits)", ref)
	}
	if err := s.checked(ctx); err != nil {
		return nil, fmt.Errorf("dynamostore: find %s: %w", ref, err)
	}
	byRef := s.byRef()
	var keys []string
	var start map[string]types.AttributeValue
	for {
		in := &dynamodb.QueryInput{
			TableName:                 aws.String(s.table),
			IndexName:                 aws.String(s.refIndex),
			KeyConditionExpression:    aws.String("#ref = :ref"),
			ExpressionAttributeNames:  map[string]string{"#ref": s.attr.Ref},
			ExpressionAttributeValues: map[string]types.AttributeValue{":ref": str(ref)},
			ExclusiveStartKey:         start,
		}
		where := fmt.Sprintf("index %q", s.refIndex)
		if byRef {
			in.IndexName, in.ConsistentRead = nil, aws.Bool(true)
			in.ProjectionExpression = aws.String("#ref, #pk, #lk, #status")
			in.ExpressionAttributeNames["#pk"] = s.attr.PartitionKey
			in.ExpressionAttributeNames["#lk"] = s.attr.LongKey
			in.ExpressionAttributeNames["#status"] = s.attr.Status
			where = fmt.Sprintf("table %q", s.table)
		}
		q, err := s.client.Query(ctx, in)
		if err != nil {
			return nil, wrap(fmt.Sprintf("dynamostore: find %s in %s", ref, where), err)
		}
		for _, item := range q.Items {
			if _, ok := item[s.attr.Status]; byRef && !ok {
				continue // a body item
			}
			if s.foreign(item) {
				continue
			}
			key, found, err := s.storedKey(ctx, "find "+ref, item)
			switch {
			case err != nil:
				return nil, fmt.Errorf("dynamostore: find %s: %w", ref, err)
			case found:
				keys = append(keys, key)
			}
		}
		if len(q.LastEvaluatedKey) == 0 {
			return keys, nil
		}
		start = q.LastEvaluatedKey
	}
}

// foreign reports whether item, an item of the table or of an index that
// holds the table's keys, is another store's: on a single-table design
// shared by stores under different Options.SortKey values, one whose sort
// key holds another value.
func (s *Store) foreign(item map[string]types.AttributeValue) bool {
	if s.sortKey.Name == "" {
		return false
	}
	v, ok := item[s.sortKey.Name].(*types.AttributeValueMemberS)
	return !ok || v.Value != s.sortKey.Value
}

// InFlight implements dedupe.Admin: one Query per partition of the sparse
// in-flight index (Options.Index) that this store's records are filed
// under, each shard and its retired partition (the stranded records Reap
// retired and counted, see Reap), then one strongly consistent GetItem
// per item listed (Inspect's, which never reads S3), up to limit live
// records. Completed and released records have left the index and are
// not listed; expired ones, which it holds until TTL deletes them, are
// skipped.
//
// It refuses, with an error wrapping ErrShardMismatch, to list records
// of writers that use another shard count (Options.Shards) than this
// store, whose records it would partly miss: a live record filed under a
// shard its key does not have with this store's count, or any live
// record in the shards from Shards to 2*Shards-1 (one Query each, and one
// per retired partition, before it lists, and one GetItem per item they
// hold), where only writers with more shards file records. A writers'
// count up to twice this store's is always detected; a larger one is,
// unless none of its in-flight records lies in the shards probed or
// below. The expired items of an earlier shard count are no sign of one:
// after a change of Options.Shards, InFlight lists again once the
// records filed under the old count have expired.
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
	for shard := s.shards; shard < 2*s.shards; shard++ {
		for _, p := range []int{shard, retiredShard(shard)} {
			var start map[string]types.AttributeValue
			for {
				q, err := s.queryPartition(ctx, p, start, probePage)
				if err != nil {
					return nil, false, err
				}
				for _, item := range q.Items {
					_, ok, err := s.liveInFlight(ctx, item, now)
					if err != nil {
						return nil, false, err
					}
					if ok {
						return nil, false, fmt.Errorf("dynamostore: in flight: a record is filed under shard %d, beyond this store's %d shards: the writers use more shards (Options.Shards) than this store: %w",
							shard, s.shards, ErrShardMismatch)
					}
				}
				if len(q.LastEvaluatedKey) == 0 {
					break
				}
				start = q.LastEvaluatedKey
			}
		}
	}
	var out []dedupe.Record
	for shard := range s.shards {
		for _, p := range []int{shard, retiredShard(shard)} {
			var start map[string]types.AttributeValue
			for {
				q, err := s.queryPartition(ctx, p, start, 0)
				if err != nil {
					return nil, false, err
				}
				for _, item := range q.Items {
					rec, ok, err := s.liveInFlight(ctx, item, now)
					if err != nil {
						return nil, false, err
					}
					if !ok {
						continue
					}
					if err := s.checkShard(rec.Key, p); err != nil {
						return nil, false, fmt.Errorf("dynamostore: in flight: %w", err)
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
	}
	return out, false, nil
}

// probePage bounds the items of each Query with which InFlight probes the
// partitions beyond its shards: usually none, or the expired leftovers of
// another shard count, which TTL deletes days late.
const probePage = 100

// liveInFlight reads the record of an item of the in-flight index, with a
// strongly consistent GetItem that never reads S3 (Inspect's: a record
// completed since the index listed it may keep its body there), and
// reports whether it is live at now and IN_PROGRESS. The index holds
// expired items until TTL deletes them, days late: those are absent, as
// everywhere, and never a sign of another shard count; so are the items
// of another store on a shared single-table design (see foreign).
func (s *Store) liveInFlight(ctx context.Context, item map[string]types.AttributeValue, now time.Time) (dedupe.Record, bool, error) {
	if s.foreign(item) {
		return dedupe.Record{}, false, nil
	}
	key, found, err := s.storedKey(ctx, "in flight", item)
	switch {
	case err != nil:
		return dedupe.Record{}, false, fmt.Errorf("dynamostore: in flight: %w", err)
	case !found:
		return dedupe.Record{}, false, nil
	}
	rec, found, err := s.inspect(ctx, key)
	if err != nil || !found || rec.Expired(now) || rec.Status != dedupe.StatusInProgress {
		return dedupe.Record{}, false, err
	}
	return rec.Record, true, nil
}

// queryPartition reads one page of partition p of the in-flight index,
// from start, at most limit items (0: no limit).
func (s *Store) queryPartition(ctx context.Context, p int, start map[string]types.AttributeValue, limit int32) (*dynamodb.QueryOutput, error) {
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(s.table),
		IndexName:                 aws.String(s.index),
		KeyConditionExpression:    aws.String("#shard = :shard"),
		ExpressionAttributeNames:  map[string]string{"#shard": s.attr.InflightShard},
		ExpressionAttributeValues: map[string]types.AttributeValue{":shard": num(int64(p))},
		ExclusiveStartKey:         start,
	}
	if limit > 0 {
		in.Limit = aws.Int32(limit)
	}
	q, err := s.client.Query(ctx, in)
	if err != nil {
		return nil, wrap(fmt.Sprintf("dynamostore: in flight: partition %d of index %q", p, s.index), err)
	}
	return q, nil
}

// retiredShard is the partition of the in-flight index to which Reap
// moves a stranded record of shard shard: -1 - shard, never a shard a
// writer files a record under, so the reaper never reads it again while
// InFlight still lists it.
func retiredShard(shard int) int { return -1 - shard }

// checkShard returns an error wrapping ErrShardMismatch unless filed, the
// in-flight index partition of key, is the shard s.Shard gives key, or
// its retired partition.
func (s *Store) checkShard(key string, filed int) error {
	want := s.Shard(key)
	if filed == want || filed == retiredShard(want) {
		return nil
	}
	shard, retired := filed, ""
	if filed < 0 {
		shard, retired = retiredShard(filed), " (retired)"
	}
	return fmt.Errorf("%s is filed under shard %d%s, but its key is in shard %d of %d: the writers use another shard count (Options.Shards) than this store: %w",
		dedupe.KeyRef(key), shard, retired, want, s.shards, ErrShardMismatch)
}

// ReleaseSeen implements dedupe.Admin with one UpdateItem that does what
// Release does, conditioned on owner = :token AND status = IN_PROGRESS
// AND lease_expires_at = :seen_lease.
func (s *Store) ReleaseSeen(ctx context.Context, seen dedupe.Record) error {
	if err := dedupe.CheckStoreKey(seen.Key); err != nil {
		return fmt.Errorf("dynamostore: release: %w", err)
	}
	if err := s.checked(ctx); err != nil {
		return fmt.Errorf("dynamostore: release %s: %w", dedupe.KeyRef(seen.Key), err)
	}
	lease := seen.LeaseExpiresAt.UnixMilli()
	if lease == 0 {
		return fmt.Errorf("dynamostore: release %s: released already: %w", dedupe.KeyRef(seen.Key), dedupe.ErrLeaseLost)
	}
	a := s.attr
	_, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:           aws.String(s.table),
		Key:                 s.key(seen.Key),
		UpdateExpression:    aws.String("SET #lease = :zero REMOVE #shard"),
		ConditionExpression: aws.String("#owner = :tok AND #status = :inprog AND #lease = :lease"),
		ExpressionAttributeNames: map[string]string{
			"#owner": a.Owner, "#status": a.Status, "#lease": a.LeaseExpiresAt,
			"#shard": a.InflightShard,
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":tok":    str(seen.Token),
			":inprog": str(string(dedupe.StatusInProgress)),
			":lease":  num(lease),
			":zero":   num(0),
		},
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return fmt.Errorf("dynamostore: release %s: changed since it was read: %w", dedupe.KeyRef(seen.Key), dedupe.ErrLeaseLost)
	}
	if err != nil {
		return wrapErr("release", seen.Key, err)
	}
	return nil
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
