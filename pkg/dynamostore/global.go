package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
)

// GlobalTables says what New does about a table that is a DynamoDB global
// table. The zero value, GlobalTablesRefuseEventual, is the safe one.
//
// A global table in multi-Region eventual consistency (MREC, the default
// mode of global tables) replicates asynchronously and resolves conflicts
// last writer wins: a conditional claim is atomic in one Region only, so
// the same key claimed in two Regions at once runs twice, and one result
// silently replaces the other. In multi-Region strong consistency (MRSC)
// a conditional write is checked against every Region, and a write that
// conflicts with one in another Region fails with
// ReplicatedWriteConflictException ("one or more items in the request are
// being modified by a request in another Region"; the write was not
// applied), which the store retries (ConflictAttempts). A claim that
// still meets it is evidence of a concurrent writer of that very key, an
// answer: Claim reports it wrapping dedupe.ErrInProgress (409 with
// Retry-After; Config.FailOpen never runs it), not
// dedupe.ErrStoreUnavailable. Complete, Release and Extend, which write
// the caller's own record, report it as unavailable, which the guard
// retries.
type GlobalTables int

const (
	// GlobalTablesRefuseEventual makes New call DescribeTable once and
	// refuse (ErrInvalidOptions) a table that has replicas (or a witness)
	// and is not in multi-Region strong consistency. A single-Region table
	// and an MRSC global table pass.
	//
	// A DescribeTable that fails transiently (throttling, a timeout, an
	// unreachable endpoint: a DynamoDB blip during a cold start) does not
	// fail New, and so not the function's init: New logs a warning, and
	// the store runs the check again on its first calls, which fail with
	// dedupe.ErrStoreUnavailable (503 with Retry-After) until it gets an
	// answer. A table then found in eventual consistency fails every call
	// with the refusal New would have returned (ErrInvalidOptions). Any
	// other DescribeTable failure (access denied, no such table) refuses
	// New, naming the fix.
	GlobalTablesRefuseEventual GlobalTables = iota
	// GlobalTablesWarnEventual makes New check as GlobalTablesRefuseEventual
	// does but, for an MREC global table, log one warning to
	// Options.Logger and accept it: for deployments that pin each key to
	// one Region themselves (see docs/security.md, Multi-Region).
	GlobalTablesWarnEventual
	// GlobalTablesUnchecked makes New call nothing: for clients that
	// cannot call DescribeTable (a policy without dynamodb:DescribeTable,
	// a stand-in), on tables known to have no MREC replicas. The check
	// costs one DescribeTable per cold start. Nothing then reads the
	// table's key schema either: Options.KeySchema must name it, or New
	// refuses (see KeySchemaDetect).
	GlobalTablesUnchecked
)

// String returns the constant's name.
func (g GlobalTables) String() string {
	switch g {
	case GlobalTablesRefuseEventual:
		return "GlobalTablesRefuseEventual"
	case GlobalTablesWarnEventual:
		return "GlobalTablesWarnEventual"
	case GlobalTablesUnchecked:
		return "GlobalTablesUnchecked"
	}
	return fmt.Sprintf("GlobalTables(%d)", int(g))
}

// CheckTimeout bounds the DescribeTable call of New's global-table check.
const CheckTimeout = 5 * time.Second

// ConflictAttempts is how many times the store sends a write that DynamoDB
// refuses with ReplicatedWriteConflictException (an MRSC global table: the
// item is being written in another Region) before it reports
// dedupe.ErrStoreUnavailable. The waits between attempts double from
// conflictBackoff.
const ConflictAttempts = 4

// conflictBackoff is the first wait after a replicated write conflict.
const conflictBackoff = 10 * time.Millisecond

// legacyGlobalTables is the GlobalTableVersion of the 2017 global tables,
// which are always eventually consistent.
const legacyGlobalTables = "2017.11.29"

// globalCheck is the global-table check of one store (Options.GlobalTables).
// New runs it once; when DescribeTable fails transiently there, the store
// keeps it and runs it again on its calls until it has an answer.
type globalCheck struct {
	client Client
	table  string
	mode   GlobalTables
	logger *slog.Logger

	// The key schema check (Options.KeySchema) rides on the same call.
	attr     Attributes
	sortKey  SortKey
	want     KeySchema
	refIndex string        // Options.RefIndex as given
	schema   *atomic.Int32 // the store's; set when the table passes

	done    atomic.Bool // the table passed
	mu      sync.Mutex  // one check at a time
	refused error       // the permanent answer, once known
}

// newGlobalCheck returns the check of opts, nil for GlobalTablesUnchecked,
// which then sets schema from Options.KeySchema (and refuses
// KeySchemaDetect: nothing would read the table's).
func newGlobalCheck(client Client, opts Options, attr Attributes, schema *atomic.Int32) (*globalCheck, error) {
	switch opts.GlobalTables {
	case GlobalTablesUnchecked:
		if opts.KeySchema == KeySchemaDetect {
			return nil, fmt.Errorf("%w: GlobalTables is GlobalTablesUnchecked, so New calls no DescribeTable and cannot read the table's key schema: "+
				"set Options.KeySchema to KeySchemaByRef (a table of TableInput or template.yaml) or KeySchemaClassic (ClassicTableInput, "+
				"or a table created before v0.2.0)", ErrInvalidOptions)
		}
		schema.Store(int32(opts.KeySchema))
		return nil, nil
	case GlobalTablesRefuseEventual, GlobalTablesWarnEventual:
	default:
		return nil, fmt.Errorf("%w: GlobalTables %v is not one of the GlobalTables constants", ErrInvalidOptions, opts.GlobalTables)
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return &globalCheck{client: client, table: opts.Table, mode: opts.GlobalTables, logger: logger,
		attr: attr, sortKey: opts.SortKey, want: opts.KeySchema, refIndex: opts.RefIndex, schema: schema}, nil
}

// check calls DescribeTable (within ctx and CheckTimeout) and judges the
// table: nil when it passes, an error wrapping dedupe.ErrStoreUnavailable
// when DescribeTable failed transiently, any other error when the table
// is refused or the call failed for good.
func (c *globalCheck) check(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, CheckTimeout)
	defer cancel()
	out, err := c.client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(c.table)})
	if err != nil {
		return wrap(fmt.Sprintf("dynamostore: check table %q for its key schema and eventually consistent replicas (Options.GlobalTables): DescribeTable "+
			"(grant dynamodb:DescribeTable on the table, or set GlobalTables to GlobalTablesUnchecked and Options.KeySchema)", c.table), err)
	}
	var elems []types.KeySchemaElement
	var defs []types.AttributeDefinition
	if out.Table != nil {
		elems, defs = out.Table.KeySchema, out.Table.AttributeDefinitions
	}
	schema, err := judgeKeySchema(c.table, elems, c.attr, c.sortKey, c.want)
	if err != nil {
		return err
	}
	if err := checkKeyTypes(c.table, elems, defs); err != nil {
		return err
	}
	if schema == KeySchemaByRef && c.refIndex != "" {
		return fmt.Errorf("%w: table %q is keyed by reference, so FindRef queries the table itself and Options.RefIndex %q means nothing: unset RefIndex",
			ErrInvalidOptions, c.table, c.refIndex)
	}
	why := eventualReplicas(out.Table)
	switch {
	case why == "":
		c.schema.Store(int32(schema))
		return nil
	case c.mode == GlobalTablesWarnEventual:
		c.logger.Warn("dynamostore: the table is a global table in multi-Region eventual consistency: "+
			"the same key claimed in two Regions at once runs twice (accepted by GlobalTablesWarnEventual)",
			"table", c.table, "replicas", why)
		c.schema.Store(int32(schema))
		return nil
	}
	return fmt.Errorf("%w: table %q is a global table in multi-Region eventual consistency (%s): a claim is atomic in one Region only, "+
		"so the same key claimed in two Regions at once runs twice; use multi-Region strong consistency, or pin each key to one Region "+
		"and set GlobalTables to GlobalTablesWarnEventual", ErrInvalidOptions, c.table, why)
}

// atNew runs the check for New. It returns the check for the store's
// calls to run again when DescribeTable failed transiently (nil when the
// table passed, or is unchecked), or the refusal.
func (c *globalCheck) atNew() (*globalCheck, error) {
	if c == nil {
		return nil, nil
	}
	err := c.check(context.Background())
	switch {
	case err == nil:
		return nil, nil
	case errors.Is(err, dedupe.ErrStoreUnavailable):
		c.logger.Warn("dynamostore: the global-tables check failed transiently at New; the store's calls run it again, "+
			"and fail with dedupe.ErrStoreUnavailable until it succeeds", "table", c.table, "err", err)
		return c, nil
	}
	return nil, err
}

// checked returns nil once the store's table has passed the global-table
// check. Until then it runs the check (one caller at a time) within ctx:
// an error wrapping dedupe.ErrStoreUnavailable while DescribeTable fails
// transiently, and the refusal, for good, once the table is refused (a
// failure met by a call whose context ended is not kept).
func (s *Store) checked(ctx context.Context) error {
	c := s.global
	if c == nil || c.done.Load() {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.done.Load():
		return nil
	case c.refused != nil:
		return c.refused
	}
	err := c.check(ctx)
	switch {
	case err == nil:
		c.done.Store(true)
	case !errors.Is(err, dedupe.ErrStoreUnavailable) && ctx.Err() == nil:
		// A caller that gave up (its context ended) learnt nothing
		// about the table: the next call checks again.
		c.refused = err
	}
	return err
}

// eventualReplicas describes why td is a global table without strong
// consistency, or returns "" when it is not a global table or is MRSC.
func eventualReplicas(td *types.TableDescription) string {
	if td == nil {
		return ""
	}
	if v := aws.ToString(td.GlobalTableVersion); v == legacyGlobalTables {
		return "global tables version " + v
	}
	if len(td.Replicas) == 0 && len(td.GlobalTableWitnesses) == 0 {
		return ""
	}
	if td.MultiRegionConsistency == types.MultiRegionConsistencyStrong {
		return ""
	}
	regions := make([]string, 0, len(td.Replicas))
	for _, r := range td.Replicas {
		regions = append(regions, aws.ToString(r.RegionName))
	}
	mode := string(td.MultiRegionConsistency)
	if mode == "" {
		mode = "no MultiRegionConsistency, so EVENTUAL"
	}
	return fmt.Sprintf("replicas %v, %s", regions, mode)
}

// conflictRetrier is the store's client: it sends a write again when
// DynamoDB refuses it with ReplicatedWriteConflictException, which only an
// MRSC global table returns. The refused write was not applied, so sending
// it again is safe; a conditional write is checked again.
type conflictRetrier struct {
	Client
}

func (c conflictRetrier) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return retryConflict(ctx, func() (*dynamodb.PutItemOutput, error) { return c.Client.PutItem(ctx, in, o...) })
}

func (c conflictRetrier) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return retryConflict(ctx, func() (*dynamodb.UpdateItemOutput, error) { return c.Client.UpdateItem(ctx, in, o...) })
}

// retryConflict calls write up to ConflictAttempts times while it fails
// with ReplicatedWriteConflictException, waiting in between unless ctx
// ends. When an attempt met a conflict and the last one failed, its error
// is returned as a *conflictedError: another Region was seen writing the
// item, whatever the last attempt met (a throttle, the end of ctx).
func retryConflict[T any](ctx context.Context, write func() (T, error)) (T, error) {
	wait := conflictBackoff
	conflicted := false
	for attempt := 1; ; attempt++ {
		out, err := write()
		var rwc *types.ReplicatedWriteConflictException
		isConflict := errors.As(err, &rwc)
		conflicted = conflicted || isConflict
		if err == nil || !isConflict || attempt == ConflictAttempts {
			if err != nil && conflicted {
				err = &conflictedError{err}
			}
			return out, err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return out, &conflictedError{err}
		case <-t.C:
		}
		wait *= 2
	}
}

// conflictedError is the last error of a write that met
// ReplicatedWriteConflictException on at least one attempt.
type conflictedError struct{ err error }

func (e *conflictedError) Error() string { return e.err.Error() }
func (e *conflictedError) Unwrap() error { return e.err }

// DeleteItem passes Forget's delete to the wrapped client, retried like
// the writes, when that client has one (see Deleter).
func (c conflictRetrier) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, o ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	del, ok := c.Client.(Deleter)
	if !ok {
		return nil, fmt.Errorf("client %T has no DeleteItem", c.Client)
	}
	return retryConflict(ctx, func() (*dynamodb.DeleteItemOutput, error) { return del.DeleteItem(ctx, in, o...) })
}
