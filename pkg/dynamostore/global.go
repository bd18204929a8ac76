package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
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
// ReplicatedWriteConflictException, which the store retries
// (ConflictAttempts) and then reports as dedupe.ErrStoreUnavailable.
type GlobalTables int

const (
	// GlobalTablesRefuseEventual makes New call DescribeTable once and
	// refuse (ErrInvalidOptions) a table that has replicas (or a witness)
	// and is not in multi-Region strong consistency. A single-Region table
	// and an MRSC global table pass.
	GlobalTablesRefuseEventual GlobalTables = iota
	// GlobalTablesWarnEventual makes New check as GlobalTablesRefuseEventual
	// does but, for an MREC global table, log one warning to
	// Options.Logger and accept it: for deployments that pin each key to
	// one Region themselves (see docs/security.md, Multi-Region).
	GlobalTablesWarnEventual
	// GlobalTablesUnchecked makes New call nothing: for clients that
	// cannot call DescribeTable (a policy without dynamodb:DescribeTable,
	// a stand-in), on tables known to have no MREC replicas. The check
	// costs one DescribeTable per cold start.
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

// checkGlobal is New's global-table check, by mode.
func checkGlobal(client Client, table string, mode GlobalTables, logger *slog.Logger) error {
	switch mode {
	case GlobalTablesUnchecked:
		return nil
	case GlobalTablesRefuseEventual, GlobalTablesWarnEventual:
	default:
		return fmt.Errorf("%w: GlobalTables %v is not one of the GlobalTables constants", ErrInvalidOptions, mode)
	}
	ctx, cancel := context.WithTimeout(context.Background(), CheckTimeout)
	defer cancel()
	out, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		return wrap(fmt.Sprintf("dynamostore: check table %q for eventually consistent replicas (Options.GlobalTables): DescribeTable "+
			"(grant dynamodb:DescribeTable on the table, or set GlobalTables to GlobalTablesUnchecked)", table), err)
	}
	why := eventualReplicas(out.Table)
	switch {
	case why == "":
		return nil
	case mode == GlobalTablesWarnEventual:
		if logger == nil {
			logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
		}
		logger.Warn("dynamostore: the table is a global table in multi-Region eventual consistency: "+
			"the same key claimed in two Regions at once runs twice (accepted by GlobalTablesWarnEventual)",
			"table", table, "replicas", why)
		return nil
	}
	return fmt.Errorf("%w: table %q is a global table in multi-Region eventual consistency (%s): a claim is atomic in one Region only, "+
		"so the same key claimed in two Regions at once runs twice; use multi-Region strong consistency, or pin each key to one Region "+
		"and set GlobalTables to GlobalTablesWarnEventual", ErrInvalidOptions, table, why)
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
// ends.
func retryConflict[T any](ctx context.Context, write func() (T, error)) (T, error) {
	wait := conflictBackoff
	for attempt := 1; ; attempt++ {
		out, err := write()
		var rwc *types.ReplicatedWriteConflictException
		if err == nil || !errors.As(err, &rwc) || attempt == ConflictAttempts {
			return out, err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return out, err
		case <-t.C:
		}
		wait *= 2
	}
}

// DeleteItem passes Forget's delete to the wrapped client, retried like
// the writes, when that client has one (see Deleter).
func (c conflictRetrier) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, o ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	del, ok := c.Client.(Deleter)
	if !ok {
		return nil, fmt.Errorf("client %T has no DeleteItem", c.Client)
	}
	return retryConflict(ctx, func() (*dynamodb.DeleteItemOutput, error) { return del.DeleteItem(ctx, in, o...) })
}
