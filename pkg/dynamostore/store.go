package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
)

// Client is the subset of *dynamodb.Client the store calls. A
// *dynamodb.Client satisfies it; tests and wrappers (metrics, fault
// injection) may stand in for it.
type Client interface {
	PutItem(ctx context.Context, params *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	GetItem(ctx context.Context, params *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	UpdateItem(ctx context.Context, params *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	Query(ctx context.Context, params *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	DescribeTable(ctx context.Context, params *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
}

var _ Client = (*dynamodb.Client)(nil)

// Options configures a Store. Only Table is required; every other zero
// field means its default.
type Options struct {
	// Table is the table name. Required.
	Table string

	// SortKey, when its Name is set, adds a fixed sort key to every item,
	// for tables that share the idempotency records with other data. The
	// zero value means the table has a partition key only.
	SortKey SortKey

	// Attributes names the item attributes. Zero fields mean the names of
	// DefaultAttributes, which match template.yaml.
	Attributes Attributes

	// Index is the name of the sparse in-flight index that Reap queries.
	// Empty means DefaultIndex.
	Index string
	// RefIndex is the name of the KEYS_ONLY index on Attributes.Ref that
	// FindRef queries on a classic table (KeySchemaClassic). Empty means
	// DefaultRefIndex. Only FindRef needs it; every claim writes the ref
	// attribute whether or not the table has the index. A table keyed by
	// reference needs no index: RefIndex is refused with it.
	RefIndex string

	// Shards is the number of in-flight shards: an IN_PROGRESS record
	// carries fnv32a(key) mod Shards in Attributes.InflightShard, and Reap
	// queries each shard once. Every writer and the reaper must agree on
	// it. Zero means DefaultShards.
	Shards int

	// CompressAbove is the body size in bytes above which a body is stored
	// gzip-compressed (when that makes it smaller). A body kept in an item
	// of its own (see BodyItemKey) is compressed below it too, when that
	// saves a write unit. Zero means DefaultCompressAbove; a negative
	// value never compresses.
	CompressAbove int

	// MaxItemBytes bounds the estimated size of a completed item. A result
	// that does not fit even compressed is not stored: the record becomes
	// COMPLETED with Attributes.ResOmitted set, and Complete returns an
	// error wrapping dedupe.ErrResultTooLarge. Zero means
	// DefaultMaxItemBytes.
	MaxItemBytes int

	// LargeResults, when set, stores results that do not fit in an item
	// (after compression) as S3 objects, so they replay byte for byte
	// instead of being omitted. The zero value stores none. See
	// LargeResults.
	LargeResults LargeResults

	// GlobalTables says what New does when the table is a global table:
	// the zero value calls DescribeTable once and refuses replicas in
	// multi-Region eventual consistency (again on the store's calls when
	// that call failed transiently). See GlobalTables.
	GlobalTables GlobalTables

	// InlineBodies keeps every response body in its record, as versions
	// before body items did: a replay's failed claim is then charged by
	// the record's size, body included. The zero value keeps a body that
	// would push the record past one write unit in an item of its own
	// (see BodyItemKey). Set it while a deploy rolls out over environments
	// of a version without body items, which answer a record naming one
	// with a malformed-record error (500) instead of its response; records
	// with a body item are read either way.
	InlineBodies bool

	// Lean makes the store write no in-flight index entry: a claim sets
	// no Attributes.InflightShard, so the sparse index is never written
	// (a fresh request costs 2 write units instead of 4, 3 instead of 5
	// on a classic table; see docs/cost.md) and Reap is refused, having
	// nothing to find. Stranded records stay correct: a retry of the same
	// request takes them over after the lease, and every record expires
	// at expires_at. What is lost is the
	// reaper's report of them (the stranded-records alarm). Every writer
	// of a table should agree; a reaper then finds only the records of
	// writers that are not Lean. Lean with Shards or Index set is refused.
	Lean bool

	// KeySchema says how the table's primary key is built: the zero value
	// reads it from the table with the DescribeTable of the global-table
	// check; with GlobalTablesUnchecked it must be set. See KeySchema.
	KeySchema KeySchema

	// Logger receives the store's warnings (GlobalTablesWarnEventual).
	// Nil means text lines on standard error, which Lambda sends to
	// CloudWatch Logs.
	Logger *slog.Logger
}

// Store is a dedupe.Store backed by one DynamoDB table. Create it with New;
// it is safe for concurrent use and holds no goroutines.
type Store struct {
	client        Client
	table         string
	sortKey       SortKey
	attr          Attributes
	index         string
	refIndex      string
	shards        int
	compressAbove int
	maxItemBytes  int
	large         LargeResults
	lean          bool
	inlineBodies  bool
	global        *globalCheck   // New's global-table check, until it has an answer; nil after
	schema        atomic.Int32   // the table's KeySchema; KeySchemaDetect until checked
	claimShapes   [2]*claimShape // classic, by ref
	completeShape *completeShape
	hooks         *testHooks // tests only; nil otherwise
}

// testHooks are what tests change in a store (a pointer, so that Store
// stays comparable).
type testHooks struct {
	refOf func(string) string // forces references to collide
}

var (
	_ dedupe.Store         = (*Store)(nil)
	_ dedupe.LeaseExtender = (*Store)(nil)
)

// New returns a Store that keeps records in opts.Table through client. It
// never loads AWS configuration, reads the environment or starts
// goroutines; build the client with config.LoadDefaultConfig and
// dynamodb.NewFromConfig once, at init. Unless Options.GlobalTables is
// GlobalTablesUnchecked, it calls DescribeTable once (bounded by
// CheckTimeout) to refuse a global table in eventual consistency; a
// transient failure of that call does not fail New (see
// GlobalTablesRefuseEventual).
//
// The client's retryer (the SDK's standard retryer by default) retries
// throttling and transient failures before the store sees them; the store
// wraps what still fails with dedupe.ErrStoreUnavailable.
func New(client Client, opts Options) (*Store, error) {
	switch {
	case client == nil:
		return nil, fmt.Errorf("%w: nil client", ErrInvalidOptions)
	case opts.Table == "":
		return nil, fmt.Errorf("%w: Table is required", ErrInvalidOptions)
	case opts.Shards < 0:
		return nil, fmt.Errorf("%w: Shards %d is negative", ErrInvalidOptions, opts.Shards)
	case opts.SortKey.Name != "" && opts.SortKey.Value == "":
		return nil, fmt.Errorf("%w: SortKey %q needs a Value", ErrInvalidOptions, opts.SortKey.Name)
	case opts.MaxItemBytes < 0:
		return nil, fmt.Errorf("%w: MaxItemBytes %d is negative", ErrInvalidOptions, opts.MaxItemBytes)
	}
	if opts.Lean && (opts.Shards != 0 || opts.Index != "") {
		return nil, fmt.Errorf("%w: Lean writes no in-flight index, so Shards and Index mean nothing: unset them, or Lean", ErrInvalidOptions)
	}
	switch opts.KeySchema {
	case KeySchemaDetect, KeySchemaClassic:
	case KeySchemaByRef:
		if opts.SortKey.Name != "" {
			return nil, fmt.Errorf("%w: SortKey %q is for classic tables: a table keyed by reference (KeySchemaByRef) has the sort key Attributes.PartitionKey; unset SortKey, or use KeySchemaClassic",
				ErrInvalidOptions, opts.SortKey.Name)
		}
		if opts.RefIndex != "" {
			return nil, fmt.Errorf("%w: RefIndex %q is for classic tables: FindRef queries a table keyed by reference (KeySchemaByRef) itself; unset RefIndex",
				ErrInvalidOptions, opts.RefIndex)
		}
	default:
		return nil, fmt.Errorf("%w: KeySchema %v is not one of the KeySchema constants", ErrInvalidOptions, opts.KeySchema)
	}
	if err := opts.LargeResults.check(); err != nil {
		return nil, err
	}
	// Two fields naming one attribute would write one over the other
	// (Ref over PartitionKey files a record under another key).
	seen := map[string]string{}
	names := opts.Attributes.withDefaults().names()
	if opts.SortKey.Name != "" {
		names = append(names, [2]string{"SortKey.Name", opts.SortKey.Name})
	}
	for _, n := range names {
		if other, ok := seen[n[1]]; ok {
			return nil, fmt.Errorf("%w: %s and %s both name the attribute %q: give each its own name", ErrInvalidOptions, other, n[0], n[1])
		}
		seen[n[1]] = n[0]
	}
	s := &Store{
		client:        conflictRetrier{client},
		table:         opts.Table,
		sortKey:       opts.SortKey,
		attr:          opts.Attributes.withDefaults(),
		index:         opts.Index,
		shards:        opts.Shards,
		compressAbove: opts.CompressAbove,
		maxItemBytes:  opts.MaxItemBytes,
		large:         opts.LargeResults,
		lean:          opts.Lean,
		inlineBodies:  opts.InlineBodies,
	}
	s.claimShapes = [2]*claimShape{s.newClaimShape(false), s.newClaimShape(true)}
	s.completeShape = s.newCompleteShape()
	gc, err := newGlobalCheck(client, opts, s.attr, &s.schema)
	if err != nil {
		return nil, err
	}
	if s.global, err = gc.atNew(); err != nil {
		return nil, err
	}
	if s.index == "" {
		s.index = DefaultIndex
	}
	if s.refIndex = opts.RefIndex; s.refIndex == "" {
		s.refIndex = DefaultRefIndex
	}
	if s.shards == 0 {
		s.shards = DefaultShards
	}
	if s.compressAbove == 0 {
		s.compressAbove = DefaultCompressAbove
	}
	if s.maxItemBytes == 0 {
		s.maxItemBytes = DefaultMaxItemBytes
	}
	return s, nil
}

// Shard returns the in-flight shard of key: FNV-1a (32 bit) of the key,
// modulo the store's shard count.
func (s *Store) Shard(key string) int {
	// FNV-1a over the string itself, as hash/fnv's New32a computes it,
	// without copying the key into a byte slice.
	h := uint32(fnvOffset32)
	for i := 0; i < len(key); i++ {
		h ^= uint32(key[i])
		h *= fnvPrime32
	}
	return int(h % uint32(s.shards))
}

// FNV-1a's 32-bit parameters (hash/fnv).
const (
	fnvOffset32 = 2166136261
	fnvPrime32  = 16777619
)

// Claim implements dedupe.Store with one conditional UpdateItem when the
// key is absent or free for req, which is every fresh request and every
// retry after a failure or a lapsed lease:
//
//  1. The claim sets the whole IN_PROGRESS record (removing any result
//     attribute), keeps first_token when the record has one
//     (if_not_exists: a takeover keeps the record's life, a new item
//     starts one with req.Token), and is conditioned on
//
//     attribute_not_exists(pk) OR (status = IN_PROGRESS AND
//     expires_at >= :now_s AND attribute_exists(first_token) AND
//     (owner = :token OR (lease_expires_at < :now_ms AND
//     fingerprint = :fp)))
//
//     (sent in its disjunctive form, without parentheses, which local
//     servers parse faster)
//
//     which is dedupe.Record.FreeFor without its expired case: the key is
//     absent; or the record is req's own earlier attempt (a reply lost,
//     the SDK's retry); or its lease has run out (a stranded record, or
//     one Release let go of) and it carries req's fingerprint. The
//     condition is checked where the record is, so nothing can change it
//     in between, and the claim is one call.
//
//  2. When the condition fails, DynamoDB returns the existing item
//     (ReturnValuesOnConditionCheckFailure ALL_OLD; a server that ignores
//     ALL_OLD, such as dynalite, costs a strongly consistent GetItem). A
//     record that is not free for req (a live lease, a completed record,
//     another fingerprint) is the answer: Acquired false with the record,
//     one call on DynamoDB. Two kinds of free record are left, each taken
//     with a conditional PutItem that replaces the whole item:
//
//     - an expired record (DynamoDB's TTL deletes lazily) starts a new
//     life, which the update cannot (it would keep the old
//     first_token): the PutItem carries first_token = req.Token and is
//     conditioned on attribute_not_exists(pk) OR expires_at < :now_s;
//
//     - a free record without first_token (written before it existed)
//     is taken over as the seen record's Life(), fenced on
//
//     owner = :seen_owner AND status = IN_PROGRESS AND lease_expires_at = :seen_lease
//
//     Every write to a record changes its owner, its status or its
//     lease, so the fence holds only while nothing touched the record
//     in between.
//
// If a write fails, the record changed: Claim decides again on the record
// the failure returns, up to takeoverAttempts writes after the first,
// then reports Acquired false with the record it last saw. A record that
// vanished or expired in between yields Acquired false with a zero
// Record, as the contract allows, and the caller may claim again.
//
// The SDK's retryer may resend a write after it was applied: a resent
// claim finds req's own token and is applied again, keeping first_token;
// a resent PutItem fails (the owner is now req's token) and the next
// round finds req's own claim.
func (s *Store) Claim(ctx context.Context, req dedupe.ClaimRequest) (dedupe.ClaimResult, error) {
	if err := dedupe.CheckStoreKey(req.Key); err != nil {
		return dedupe.ClaimResult{}, fmt.Errorf("dynamostore: claim: %w", err)
	}
	a := s.attr
	rec := dedupe.Record{
		Key:            req.Key,
		Status:         dedupe.StatusInProgress,
		Fingerprint:    req.Fingerprint,
		Token:          req.Token,
		FirstToken:     req.Token,
		LeaseExpiresAt: time.UnixMilli(req.LeaseUntil.UnixMilli()).UTC(),
		ExpiresAt:      time.Unix(req.ExpiresAt.Unix(), 0).UTC(),
		CreatedAt:      time.UnixMilli(req.Now.UnixMilli()).UTC(),
		UpdatedAt:      time.UnixMilli(req.Now.UnixMilli()).UTC(),
		RequestID:      req.RequestID,
		Trace:          req.Trace,
	}
	if err := s.checked(ctx); err != nil {
		return dedupe.ClaimResult{}, fmt.Errorf("dynamostore: claim %s: %w", dedupe.KeyRef(req.Key), err)
	}
	life, existing, found, err := s.claimUpdate(ctx, req)
	switch {
	case err != nil && existing != nil && !existing.Expired(req.Now):
		// A completed record whose result cannot be read: an answer.
		return dedupe.ClaimResult{Record: *existing}, err
	case err != nil && existing == nil:
		return dedupe.ClaimResult{}, err
	case err == nil && !found:
		rec.FirstToken = life
		return dedupe.ClaimResult{Acquired: true, Record: rec}, nil
	}
	// The claim's condition failed on existing (nil: gone since). An
	// expired one whose result could not be read needs no result: it is
	// absent, and the new life below replaces it in this call, rather
	// than send the caller back to claim again. The item a PutItem writes
	// is built when one is sent: most failed claims are answers (a
	// replay, a conflict) and send none.
	var item map[string]types.AttributeValue
	for range takeoverAttempts {
		var in *dynamodb.PutItemInput
		switch {
		case existing == nil:
			// Vanished since the claim failed.
			return dedupe.ClaimResult{}, nil
		case existing.Expired(req.Now):
			// A new life: the fresh write.
			life = req.Token
			in = &dynamodb.PutItemInput{
				ConditionExpression:       aws.String("attribute_not_exists(#pk) OR #exp < :now"),
				ExpressionAttributeNames:  map[string]string{"#pk": a.PartitionKey, "#exp": a.ExpiresAt},
				ExpressionAttributeValues: map[string]types.AttributeValue{":now": num(req.Now.Unix())},
			}
		case !existing.FreeFor(req.Now, req.Fingerprint, req.Token):
			return dedupe.ClaimResult{Record: *existing}, nil
		default:
			// Free, yet the claim's condition failed: a record without
			// first_token, or one that changed in between.
			life = existing.Life()
			in = &dynamodb.PutItemInput{
				ConditionExpression: aws.String("#owner = :owner AND #status = :inprog AND #lease = :lease"),
				ExpressionAttributeNames: map[string]string{
					"#owner":  a.Owner,
					"#status": a.Status,
					"#lease":  a.LeaseExpiresAt,
				},
				ExpressionAttributeValues: map[string]types.AttributeValue{
					":owner":  str(existing.Token),
					":inprog": str(string(dedupe.StatusInProgress)),
					":lease":  num(existing.LeaseExpiresAt.UnixMilli()),
				},
			}
		}
		if item == nil {
			item = s.claimItem(req)
		}
		item[a.FirstToken] = str(life)
		in.TableName, in.Item = aws.String(s.table), item
		in.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
		seen := existing
		existing, found, err = s.put(ctx, req.Key, in)
		switch {
		case err != nil && existing != nil && !existing.Expired(req.Now):
			return dedupe.ClaimResult{Record: *existing}, err
		case err != nil && existing != nil:
			return dedupe.ClaimResult{}, nil
		case errors.Is(err, dedupe.ErrStoreUnavailable) && seen.Expired(req.Now):
			// The claim found an expired record, and the write that would
			// start a new life failed without an answer: whether it was
			// applied is unknown, and another claim may have taken the
			// key meanwhile. The store has answered about the key, so
			// this is no "no answer": in flight (the expired record is
			// absent, so none is returned), and FailOpen does not run the
			// work beside a possible owner.
			return dedupe.ClaimResult{}, fmt.Errorf("dynamostore: claim %s: starting a new life over an expired record: %w: %v", dedupe.KeyRef(req.Key), dedupe.ErrInProgress, err)
		case errors.Is(err, dedupe.ErrStoreUnavailable):
			// The record seen was free for req, and the write that would
			// take it over failed without an answer: in flight, likewise.
			return dedupe.ClaimResult{Record: *seen}, fmt.Errorf("dynamostore: claim %s: taking over a stranded record: %w: %v", dedupe.KeyRef(req.Key), dedupe.ErrInProgress, err)
		case err != nil:
			return dedupe.ClaimResult{}, err
		case !found:
			rec.FirstToken = life
			return dedupe.ClaimResult{Acquired: true, Record: rec}, nil
		}
	}
	if existing == nil || existing.FreeFor(req.Now, req.Fingerprint, req.Token) {
		return dedupe.ClaimResult{}, nil
	}
	return dedupe.ClaimResult{Record: *existing}, nil
}

// claimItem returns the IN_PROGRESS item a claim's PutItem writes, but
// for first_token.
func (s *Store) claimItem(req dedupe.ClaimRequest) map[string]types.AttributeValue {
	a := s.attr
	item := s.key(req.Key)
	item[a.Status] = str(string(dedupe.StatusInProgress))
	item[a.Fingerprint] = str(req.Fingerprint)
	item[a.Owner] = str(req.Token)
	item[a.LeaseExpiresAt] = num(req.LeaseUntil.UnixMilli())
	item[a.ExpiresAt] = num(req.ExpiresAt.Unix())
	item[a.CreatedAt] = num(req.Now.UnixMilli())
	item[a.UpdatedAt] = num(req.Now.UnixMilli())
	if !s.lean {
		item[a.InflightShard] = num(int64(s.Shard(req.Key)))
	}
	s.putProvenance(item, req.Key, req.RequestID, req.Trace)
	if long := s.longKey(req.Key); long != "" {
		item[a.LongKey] = str(long)
	}
	return item
}

// claimUpdate runs the claim's UpdateItem (see Claim). It returns found
// false and the record's life (its first_token after the write, from the
// item the write returns: ALL_NEW, since UPDATED_NEW leaves out an
// attribute if_not_exists kept, on moto) when the write was applied;
// otherwise what put returns for a failed write.
func (s *Store) claimUpdate(ctx context.Context, req dedupe.ClaimRequest) (life string, existing *dedupe.Record, found bool, err error) {
	shape := s.claimShape()
	// Each claim gets maps of its own, cloned from the shape's so that
	// they are laid out as the shape's are (see claimShape), and values
	// of its own: nothing the SDK or a wrapping Client is handed is
	// shared between calls.
	names, values := maps.Clone(shape.names), maps.Clone(shape.values)
	values[":inprog"] = str(string(dedupe.StatusInProgress))
	values[":fp"] = str(req.Fingerprint)
	values[":tok"] = str(req.Token)
	values[":lease"] = num(req.LeaseUntil.UnixMilli())
	values[":exp"] = num(req.ExpiresAt.Unix())
	values[":nowms"] = num(req.Now.UnixMilli())
	values[":now"] = num(req.Now.Unix())
	if _, ok := values[":ref"]; ok {
		values[":ref"] = str(s.ref(req.Key))
	}
	if _, ok := values[":shard"]; ok {
		values[":shard"] = num(int64(s.Shard(req.Key)))
	}
	set, remove := shape.set, shape.remove
	if long := s.longKey(req.Key); long != "" {
		set += ", #lk = :lk"
		names["#lk"], values[":lk"] = s.attr.LongKey, str(long)
	}
	set, remove = s.setProvenance(set, remove, names, values, req.RequestID, req.Trace)
	out, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:        aws.String(s.table),
		Key:              s.key(req.Key),
		UpdateExpression: aws.String(set + remove),
		// AND binds tighter than OR. Written without parentheses, in the
		// disjunctive form: dynalite parses a nested condition three
		// times slower (3 ms against 1 ms), DynamoDB alike.
		ConditionExpression: aws.String("attribute_not_exists(#pk) OR " +
			"#status = :inprog AND #exp >= :now AND attribute_exists(#first) AND #owner = :tok OR " +
			"#status = :inprog AND #exp >= :now AND attribute_exists(#first) AND #lease < :nowms AND #fp = :fp"),
		ExpressionAttributeNames:            names,
		ExpressionAttributeValues:           values,
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err == nil {
		life = req.Token
		if v, ok := out.Attributes[s.attr.FirstToken].(*types.AttributeValueMemberS); ok && v.Value != "" {
			life = v.Value
		}
		return life, nil, false, nil
	}
	existing, found, err = s.failed(ctx, req.Key, err)
	return "", existing, found, err
}

// claimShape is what every claim's UpdateItem of a store on one key
// schema has in common: its attribute names (those of the provenance
// included), the names of the values it always sets (holding
// placeholders), and its SET and REMOVE clauses but for a long key and
// the provenance.
//
// Each claim clones these maps rather than build its own. A map built
// anew gets a new hash seed, so the SDK, which writes a map in its
// iteration order, sends its keys in a new order at almost every call;
// clones keep the seed and layout of the shape's, whose iteration orders
// are few. The request means the same in any order, but a server may
// pay for each order it has not seen: dynalite (Node.js, whose objects
// are shaped by the order their keys came in) answered a replay's failing
// claim 30 to 40 us later (some 6% of the call) with maps built per call
// than with the same maps sent again, as the bench's replay floor sends
// them.
type claimShape struct {
	names       map[string]string
	values      map[string]types.AttributeValue
	set, remove string
}

// claimShape returns the store's claimShape for its key schema.
func (s *Store) claimShape() *claimShape {
	if s.byRef() {
		return s.claimShapes[1]
	}
	return s.claimShapes[0]
}

// newClaimShape returns the claimShape of the store's claims on a table
// keyed by reference (byRef) or on a classic one.
func (s *Store) newClaimShape(byRef bool) *claimShape {
	a := s.attr
	c := &claimShape{
		names: map[string]string{
			"#pk": a.PartitionKey, "#status": a.Status, "#fp": a.Fingerprint, "#owner": a.Owner, "#first": a.FirstToken,
			"#lease": a.LeaseExpiresAt, "#exp": a.ExpiresAt, "#created": a.CreatedAt, "#upd": a.UpdatedAt, "#ref": a.Ref,
			"#shard": a.InflightShard, "#rs": a.ResStatus, "#rh": a.ResHeaders, "#rb": a.ResBody, "#re": a.ResEncoding,
			"#ro": a.ResOmitted, "#robj": a.ResObject, "#ritem": a.ResItem, "#rid": a.RequestID, "#trace": a.Trace,
		},
		// Sized for every value the claim may carry (the shard, the
		// provenance, a long key), so that a clone is not grown.
		values: make(map[string]types.AttributeValue, 12),
		set: "SET #status = :inprog, #fp = :fp, #owner = :tok, #first = if_not_exists(#first, :tok), #lease = :lease, " +
			"#exp = :exp, #created = :nowms, #upd = :nowms",
		remove: " REMOVE #rs, #rh, #rb, #re, #ro, #robj, #ritem",
	}
	for _, v := range []string{":inprog", ":fp", ":tok", ":lease", ":exp", ":nowms", ":now"} {
		c.values[v] = nil
	}
	if byRef {
		// ref is the partition key, set by the Key.
		delete(c.names, "#ref")
	} else {
		c.set += ", #ref = :ref"
		c.values[":ref"] = nil
	}
	if s.lean {
		c.remove += ", #shard"
	} else {
		c.set += ", #shard = :shard"
		c.values[":shard"] = nil
	}
	return c
}

// completeShape is, as claimShape is for a claim, what every
// completion's UpdateItem has in common: all its attribute names, and
// the values it always sets (holding placeholders).
type completeShape struct {
	names  map[string]string
	values map[string]types.AttributeValue
}

// newCompleteShape returns the store's completeShape.
func (s *Store) newCompleteShape() *completeShape {
	a := s.attr
	c := &completeShape{
		names: map[string]string{
			"#owner": a.Owner, "#exp": a.ExpiresAt, "#status": a.Status, "#upd": a.UpdatedAt, "#rs": a.ResStatus,
			"#rh": a.ResHeaders, "#rb": a.ResBody, "#re": a.ResEncoding, "#ro": a.ResOmitted, "#shard": a.InflightShard,
			"#rid": a.RequestID, "#trace": a.Trace, "#robj": a.ResObject, "#ritem": a.ResItem,
		},
		// Sized for every value a completion may carry (the provenance,
		// the headers, the body and its encoding).
		values: make(map[string]types.AttributeValue, 12),
	}
	for _, v := range []string{":tok", ":now", ":completed", ":exp", ":upd", ":rs", ":ro"} {
		c.values[v] = nil
	}
	return c
}

// takeoverAttempts bounds the fenced writes of one Claim (see Claim).
const takeoverAttempts = 2

// put runs a conditional PutItem of Claim. It returns found false when
// the write was applied. When the condition failed, it returns found true
// and the record that made it fail: the ALL_OLD item, or, from a server
// that ignores ALL_OLD, a strongly consistent read (nil when the record
// vanished in between).
//
// What put learnt before a later step failed is an answer (see
// dedupe.ErrStoreUnavailable), never reported as unavailable:
//
//   - a record whose result is in S3 and cannot be read: the record
//     (without its Result) and the fetch's error;
//   - a write refused with ReplicatedWriteConflictException on every
//     attempt (another Region writes the item), or a failed condition
//     (a live record holds the key) whose record the read then could not
//     fetch: an error wrapping dedupe.ErrInProgress, a concurrent writer.
func (s *Store) put(ctx context.Context, key string, in *dynamodb.PutItemInput) (existing *dedupe.Record, found bool, err error) {
	_, err = s.client.PutItem(ctx, in)
	if err == nil {
		return nil, false, nil
	}
	return s.failed(ctx, key, err)
}

// failed turns the error of a claim's conditional write (a PutItem or
// the claim's UpdateItem) into what put returns (see put).
func (s *Store) failed(ctx context.Context, key string, err error) (existing *dedupe.Record, found bool, _ error) {
	// The failed condition first: it is the common case (every replay
	// and conflict), and one errors.As then decides.
	var ccf *types.ConditionalCheckFailedException
	var conflicted *conflictedError
	switch isCCF := errors.As(err, &ccf); {
	case !isCCF && errors.As(err, &conflicted):
		return nil, false, fmt.Errorf("dynamostore: claim %s: another Region is writing the key (ReplicatedWriteConflictException, %d attempts): %w: %v",
			dedupe.KeyRef(key), ConflictAttempts, dedupe.ErrInProgress, err)
	case !isCCF:
		return nil, false, wrapErr("claim", key, err)
	}
	if len(ccf.Item) > 0 {
		rec, err := s.load(ctx, "claim", key, ccf.Item)
		switch {
		case err != nil && rec.Key != "":
			return &rec, true, err
		case err != nil:
			return nil, false, fmt.Errorf("dynamostore: claim %s: %w", dedupe.KeyRef(key), err)
		}
		return &rec, true, nil
	}
	rec, ok, err := s.read(ctx, "claim", key)
	switch {
	case err != nil && rec.Key != "":
		return &rec, true, err
	case err != nil && errors.Is(err, dedupe.ErrStoreUnavailable):
		return nil, false, fmt.Errorf("dynamostore: claim %s: a live record holds the key (its condition failed), and reading it failed: %w: %v",
			dedupe.KeyRef(key), dedupe.ErrInProgress, err)
	case err != nil:
		return nil, false, err
	case !ok:
		return nil, true, nil
	}
	return &rec, true, nil
}

// Complete implements dedupe.Store with one UpdateItem conditioned on
// owner = :token AND expires_at >= :now_s. It sets status COMPLETED, the
// result attributes, expires_at and updated_at, and removes inflight_shard,
// so the record leaves the in-flight index.
//
// A body above Options.CompressAbove is stored gzip-compressed. A body
// that would push the record past one write unit (WriteUnitBytes) is
// written to an item of its own first, and the record names it (see
// BodyItemKey); if that write fails, the body is stored inline. If the
// completed item would still exceed Options.MaxItemBytes (or DynamoDB
// refuses it as too large), the record is completed without its result
// (res_omitted true) and Complete returns an error wrapping
// dedupe.ErrResultTooLarge: retries get dedupe.ErrResultOmitted and never
// run the work again.
func (s *Store) Complete(ctx context.Context, req dedupe.CompleteRequest) error {
	if err := dedupe.CheckStoreKey(req.Key); err != nil {
		return fmt.Errorf("dynamostore: complete: %w", err)
	}
	if err := s.checked(ctx); err != nil {
		return fmt.Errorf("dynamostore: complete %s: %w", dedupe.KeyRef(req.Key), err)
	}
	if req.OmitResult {
		return s.update(ctx, req, encodedResult{status: req.Result.StatusCode, omitted: true})
	}
	res := s.encodeResult(req.Result)
	size := s.completedSize(req, res)
	if size > s.maxItemBytes {
		if s.large.enabled() {
			return s.completeLarge(ctx, req, res)
		}
		return s.completeOmitted(ctx, req, fmt.Sprintf("item of about %d bytes exceeds %d", size, s.maxItemBytes))
	}
	if len(res.body) > 0 && size > WriteUnitBytes && !s.inlineBodies {
		if split, ok := s.splitBody(ctx, req, res); ok {
			return s.update(ctx, req, split)
		}
	}
	err := s.update(ctx, req, res)
	if isItemTooLarge(err) {
		if s.large.enabled() {
			return s.completeLarge(ctx, req, res)
		}
		return s.completeOmitted(ctx, req, "DynamoDB refused the item as too large")
	}
	return err
}

// completeOmitted completes the record without its result and reports
// dedupe.ErrResultTooLarge, or the update's own error.
func (s *Store) completeOmitted(ctx context.Context, req dedupe.CompleteRequest, why string) error {
	if err := s.update(ctx, req, encodedResult{status: req.Result.StatusCode, omitted: true}); err != nil {
		return err
	}
	return fmt.Errorf("dynamostore: complete %s: %s, stored without result: %w", dedupe.KeyRef(req.Key), why, dedupe.ErrResultTooLarge)
}

// update runs the conditional UpdateItem of Complete.
func (s *Store) update(ctx context.Context, req dedupe.CompleteRequest, res encodedResult) error {
	// Cloned, for the reason claimShape gives; each call's own maps and
	// values.
	names, values := maps.Clone(s.completeShape.names), maps.Clone(s.completeShape.values)
	values[":tok"] = str(req.Token)
	values[":now"] = num(req.Now.Unix())
	values[":completed"] = str(string(dedupe.StatusCompleted))
	values[":exp"] = num(req.ExpiresAt.Unix())
	values[":upd"] = num(req.Now.UnixMilli())
	values[":rs"] = num(int64(res.status))
	values[":ro"] = &types.AttributeValueMemberBOOL{Value: res.omitted}
	set := "SET #status = :completed, #exp = :exp, #upd = :upd, #rs = :rs, #ro = :ro"
	remove := " REMOVE #shard"
	set, remove = s.setProvenance(set, remove, names, values, req.RequestID, req.Trace)
	if len(res.headers) > 0 {
		set += ", #rh = :rh"
		values[":rh"] = &types.AttributeValueMemberB{Value: res.headers}
	} else {
		remove += ", #rh"
	}
	switch {
	case len(res.body) > 0:
		set += ", #rb = :rb, #re = :re"
		values[":rb"] = &types.AttributeValueMemberB{Value: res.body}
		values[":re"] = str(res.encoding)
		remove += ", #robj, #ritem"
	case res.object != nil:
		set += ", #robj = :robj, #re = :re"
		values[":robj"] = res.object.attribute()
		values[":re"] = str(res.encoding)
		remove += ", #rb, #ritem"
	case res.item != nil:
		set += ", #ritem = :ritem, #re = :re"
		values[":ritem"] = res.item.attribute()
		// Marked, so that a version without body items refuses the
		// record (an unknown encoding) rather than replay an empty body.
		values[":re"] = str(bodyItemEncoding + res.encoding)
		remove += ", #rb, #robj"
	default:
		remove += ", #rb, #re, #robj, #ritem"
	}
	_, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       s.key(req.Key),
		UpdateExpression:          aws.String(set + remove),
		ConditionExpression:       aws.String("#owner = :tok AND #exp >= :now"),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return fmt.Errorf("dynamostore: complete %s: %w", dedupe.KeyRef(req.Key), dedupe.ErrLeaseLost)
	}
	if err != nil {
		return wrapErr("complete", req.Key, err)
	}
	return nil
}

// Release implements dedupe.Store with one UpdateItem conditioned on
// owner = :token AND status = IN_PROGRESS. It sets lease_expires_at to 0
// (the lease has run out, so a retry of the same request takes the key at
// once) and removes inflight_shard: a released record has nothing left
// for the reaper. The record and its fingerprint stay until expires_at.
func (s *Store) Release(ctx context.Context, key, token string) error {
	if err := dedupe.CheckStoreKey(key); err != nil {
		return fmt.Errorf("dynamostore: release: %w", err)
	}
	if err := s.checked(ctx); err != nil {
		return fmt.Errorf("dynamostore: release %s: %w", dedupe.KeyRef(key), err)
	}
	a := s.attr
	_, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:           aws.String(s.table),
		Key:                 s.key(key),
		UpdateExpression:    aws.String("SET #lease = :zero REMOVE #shard"),
		ConditionExpression: aws.String("#owner = :tok AND #status = :inprog"),
		ExpressionAttributeNames: map[string]string{
			"#owner": a.Owner, "#status": a.Status, "#lease": a.LeaseExpiresAt,
			"#shard": a.InflightShard,
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":tok":    str(token),
			":inprog": str(string(dedupe.StatusInProgress)),
			":zero":   num(0),
		},
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return fmt.Errorf("dynamostore: release %s: %w", dedupe.KeyRef(key), dedupe.ErrLeaseLost)
	}
	if err != nil {
		return wrapErr("release", key, err)
	}
	return nil
}

// Extend implements dedupe.LeaseExtender with one UpdateItem conditioned
// on owner = :token AND status = IN_PROGRESS AND expires_at >= :now_s AND
// lease_expires_at >= :now_ms. It
// sets lease_expires_at, expires_at and updated_at; the record stays in
// the in-flight index, where the reaper now sees the later lease end.
func (s *Store) Extend(ctx context.Context, req dedupe.ExtendRequest) error {
	if err := dedupe.CheckStoreKey(req.Key); err != nil {
		return fmt.Errorf("dynamostore: extend: %w", err)
	}
	if err := s.checked(ctx); err != nil {
		return fmt.Errorf("dynamostore: extend %s: %w", dedupe.KeyRef(req.Key), err)
	}
	a := s.attr
	_, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:           aws.String(s.table),
		Key:                 s.key(req.Key),
		UpdateExpression:    aws.String("SET #lease = :lease, #exp = :exp, #upd = :upd"),
		ConditionExpression: aws.String("#owner = :tok AND #status = :inprog AND #exp >= :now AND #lease >= :nowms"),
		ExpressionAttributeNames: map[string]string{
			"#owner": a.Owner, "#status": a.Status, "#lease": a.LeaseExpiresAt,
			"#exp": a.ExpiresAt, "#upd": a.UpdatedAt,
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":tok":    str(req.Token),
			":inprog": str(string(dedupe.StatusInProgress)),
			":lease":  num(req.LeaseUntil.UnixMilli()),
			":exp":    num(req.ExpiresAt.Unix()),
			":upd":    num(req.Now.UnixMilli()),
			":now":    num(req.Now.Unix()),
			":nowms":  num(req.Now.UnixMilli()),
		},
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return fmt.Errorf("dynamostore: extend %s: %w", dedupe.KeyRef(req.Key), dedupe.ErrLeaseLost)
	}
	if err != nil {
		return wrapErr("extend", req.Key, err)
	}
	return nil
}

// Get implements dedupe.Store with one strongly consistent GetItem. A
// record whose expires_at is before now (DynamoDB's TTL deletes lazily)
// is reported as dedupe.ErrNotFound.
func (s *Store) Get(ctx context.Context, key string, now time.Time) (dedupe.Record, error) {
	if err := dedupe.CheckStoreKey(key); err != nil {
		return dedupe.Record{}, fmt.Errorf("dynamostore: get: %w", err)
	}
	if err := s.checked(ctx); err != nil {
		return dedupe.Record{}, fmt.Errorf("dynamostore: get %s: %w", dedupe.KeyRef(key), err)
	}
	rec, found, err := s.read(ctx, "get", key)
	switch {
	case err != nil && rec.Key != "" && !rec.Expired(now):
		return rec, err // a completed record whose result cannot be read
	case err != nil && rec.Key != "":
		return dedupe.Record{}, fmt.Errorf("dynamostore: get %s: expired: %w", dedupe.KeyRef(key), dedupe.ErrNotFound)
	case err != nil:
		return dedupe.Record{}, err
	case !found:
		return dedupe.Record{}, fmt.Errorf("dynamostore: get %s: %w", dedupe.KeyRef(key), dedupe.ErrNotFound)
	case rec.Expired(now):
		return dedupe.Record{}, fmt.Errorf("dynamostore: get %s: expired: %w", dedupe.KeyRef(key), dedupe.ErrNotFound)
	}
	return rec, nil
}

// read fetches and decodes the record for key with a strongly consistent
// GetItem; op names the calling operation in errors. A record whose
// result is in S3 and cannot be read is returned, without its Result,
// with found true and fetch's error.
func (s *Store) read(ctx context.Context, op, key string) (rec dedupe.Record, found bool, err error) {
	out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(s.table),
		Key:            s.key(key),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return dedupe.Record{}, false, wrapErr(op, key, err)
	}
	if len(out.Item) == 0 {
		return dedupe.Record{}, false, nil
	}
	rec, err = s.load(ctx, op, key, out.Item)
	switch {
	case err != nil && rec.Key != "":
		return rec, true, err // its result cannot be read (see fetch)
	case err != nil:
		return dedupe.Record{}, false, fmt.Errorf("dynamostore: %s %s: %w", op, dedupe.KeyRef(key), err)
	}
	return rec, true, nil
}

func str(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }

func num(v int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
}
