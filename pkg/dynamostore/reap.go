package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
)

// Defaults applied by Store.Reap for zero fields of ReapOptions.
const (
	DefaultReapGrace    = 30 * time.Second
	DefaultReapWarnAge  = 15 * time.Minute
	DefaultReapPageSize = 100
	DefaultReapWorkers  = 4
	DefaultReapMargin   = 2 * time.Second
)

// ReapOptions configures Store.Reap. The zero value (or a zero field)
// means the defaults.
type ReapOptions struct {
	// Now is the clock. Nil means time.Now.
	Now func() time.Time

	// Grace is how long past its lease a record must be before it is
	// cleared; it leaves room for a retry to take the key over first and
	// for clock skew between writers. Zero means DefaultReapGrace; a
	// negative value means no grace.
	Grace time.Duration

	// WarnAge is the age (time since the claim) above which a cleared
	// record is logged at warning level rather than info: its invocation
	// likely died after starting its side effect. Zero means
	// DefaultReapWarnAge.
	WarnAge time.Duration

	// PageSize is the Limit of each Query. Zero means DefaultReapPageSize.
	PageSize int32

	// Workers bounds how many shards are reaped at once. Zero means
	// DefaultReapWorkers.
	Workers int

	// Margin is how long before the context's deadline Reap stops starting
	// new calls, so that it returns its report in time. Zero means
	// DefaultReapMargin.
	Margin time.Duration

	// Logger receives one line per cleared record. Nil means no logging.
	Logger *slog.Logger

	// BeforeDelete, when set, is called with each candidate's key between
	// the Query that found it and its conditional UpdateItem. It is a test
	// hook for injecting races deterministically; it may be called from
	// several goroutines at once.
	BeforeDelete func(ctx context.Context, key string)
}

// withDefaults returns a copy of o with every zero field defaulted.
func (o ReapOptions) withDefaults() ReapOptions {
	if o.Now == nil {
		o.Now = time.Now
	}
	switch {
	case o.Grace == 0:
		o.Grace = DefaultReapGrace
	case o.Grace < 0:
		o.Grace = 0
	}
	if o.WarnAge <= 0 {
		o.WarnAge = DefaultReapWarnAge
	}
	if o.PageSize <= 0 {
		o.PageSize = DefaultReapPageSize
	}
	if o.Workers <= 0 {
		o.Workers = DefaultReapWorkers
	}
	if o.Margin <= 0 {
		o.Margin = DefaultReapMargin
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// ReapReport is what one Reap run did. It is the reaper Lambda's return
// value, hence the JSON names.
type ReapReport struct {
	// Found counts the stranded candidates the index returned.
	Found int `json:"found"`
	// Cleared counts the records retired: moved to the retired partitions
	// of the in-flight index, which Reap does not read again and
	// InFlight still lists.
	Cleared int `json:"cleared"`
	// Skipped counts candidates left alone because they changed between
	// the query and the update (taken over, completed, released, or
	// cleared by a concurrent run).
	Skipped int `json:"skipped"`
	// Errors counts failed calls: queries and updates.
	Errors int `json:"errors"`
	// Pages counts Query calls.
	Pages int `json:"pages"`
	// ItemsRead sums the ScannedCount of every Query: the index items read
	// and paid for.
	ItemsRead int `json:"itemsRead"`
	// Truncated reports that the run left work for the next run: it
	// stopped early (deadline or cancellation), or a shard's query failed.
	Truncated bool `json:"truncated"`
	// ShardsLeft lists, in order, the shards not fully reaped.
	ShardsLeft []int `json:"shardsLeft,omitempty"`
}

// Reap clears stranded in-flight records out of the in-flight index:
// IN_PROGRESS records whose lease ran out more than opts.Grace ago and
// that nobody took over, typically because their invocation timed out or
// crashed.
//
// A cleared record is retired, not deleted: one UpdateItem moves it to
// the retired partition of its shard in the in-flight index
// (inflight_shard = -1 - shard), which Reap never queries, so it is
// found and counted once, while InFlight (dedupe stranded) still lists
// it: what the stranded-records alarm counted, the operator finds. The
// record is kept until it expires; a takeover claim files it under its
// shard again, and a completion or a release takes it out of the index.
// Deleting it would free the key
// for any request, so a different request reusing the key could run after
// the first one's side effect may already have happened; kept, the key
// still answers 422 to a different request, and a retry of the same
// request still takes it over (its claim puts the record back in the
// index).
//
// It never scans the table. Per shard it queries the sparse in-flight index
// (inflight_shard = :shard AND lease_expires_at < :cutoff, paginated by
// opts.PageSize), so its cost grows with what is stranded, not with the
// number of completed records. Each candidate is retired with one
// UpdateItem conditioned on
//
//	inflight_shard = :shard AND status = IN_PROGRESS
//	  AND owner = :owner_read AND lease_expires_at < :cutoff
//
// so a record taken over, completed, released or retired by a concurrent
// run after the query is never touched; it counts as Skipped. Records that have expired but that TTL
// has not deleted yet are still in the index while IN_PROGRESS, and are
// retired like any other.
//
//	claim      lease end     cutoff = now - grace       now          expires_at
//	  |------------|------------------|-------------------|---- kept ----|
//	               candidates: lease_expires_at < cutoff       TTL deletes
//
// Shards are reaped by at most opts.Workers goroutines, all of which have
// returned when Reap does. Reap stops starting new calls opts.Margin before
// the context's deadline and reports Truncated with the shards it left;
// running two Reaps at once is harmless. It returns the report together
// with an error joining the failures it counted in Errors (wrapping
// dedupe.ErrStoreUnavailable when transient).
func (s *Store) Reap(ctx context.Context, opts ReapOptions) (ReapReport, error) {
	if s.lean {
		return ReapReport{}, fmt.Errorf("%w: Reap on a Lean store, which writes no in-flight index: build the reaper's store without Lean", ErrInvalidOptions)
	}
	if err := s.checked(ctx); err != nil {
		return ReapReport{}, fmt.Errorf("dynamostore: reap: %w", err)
	}
	o := opts.withDefaults()
	now := o.Now()
	r := reaper{s: s, o: o, now: now, cutoff: now.Add(-o.Grace).UnixMilli()}

	work := ctx
	if deadline, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		work, cancel = context.WithDeadline(ctx, deadline.Add(-o.Margin))
		defer cancel()
	}

	results := make([]shardResult, s.shards)
	shards := make(chan int)
	var wg sync.WaitGroup
	// At least one worker, whatever withDefaults became: with none, the
	// feed below would wait forever on a context without a deadline.
	for range max(1, min(o.Workers, s.shards)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for shard := range shards {
				results[shard] = r.shard(work, shard)
			}
		}()
	}
feed:
	for shard := range s.shards {
		select {
		case shards <- shard:
		case <-work.Done():
			break feed
		}
	}
	close(shards)
	wg.Wait()

	var report ReapReport
	var errs []error
	for shard, res := range results {
		report.Found += res.found
		report.Cleared += res.cleared
		report.Skipped += res.skipped
		report.Errors += len(res.errs)
		report.Pages += res.pages
		report.ItemsRead += res.itemsRead
		errs = append(errs, res.errs...)
		if !res.done {
			report.ShardsLeft = append(report.ShardsLeft, shard)
		}
	}
	report.Truncated = len(report.ShardsLeft) > 0
	slices.Sort(report.ShardsLeft)
	return report, errors.Join(errs...)
}

// reaper is one Reap run.
type reaper struct {
	s      *Store
	o      ReapOptions
	now    time.Time
	cutoff int64 // epoch ms
}

// shardResult is what the run did in one shard.
type shardResult struct {
	found, cleared, skipped, pages, itemsRead int
	errs                                      []error
	done                                      bool // every page read and every candidate handled
}

// shard reaps one shard, page by page, until it is done, a query fails, or
// ctx ends.
func (r *reaper) shard(ctx context.Context, shard int) (res shardResult) {
	a := r.s.attr
	var start map[string]types.AttributeValue
	for {
		if ctx.Err() != nil {
			return res
		}
		out, err := r.s.client.Query(ctx, &dynamodb.QueryInput{
			TableName:              aws.String(r.s.table),
			IndexName:              aws.String(r.s.index),
			KeyConditionExpression: aws.String("#shard = :shard AND #lease < :cutoff"),
			ExpressionAttributeNames: map[string]string{
				"#shard": a.InflightShard,
				"#lease": a.LeaseExpiresAt,
			},
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":shard":  num(int64(shard)),
				":cutoff": num(r.cutoff),
			},
			Limit:             aws.Int32(r.o.PageSize),
			ExclusiveStartKey: start,
		})
		if err != nil {
			if ctx.Err() == nil {
				res.errs = append(res.errs, wrap(fmt.Sprintf("dynamostore: reap shard %d", shard), err))
			}
			return res
		}
		res.pages++
		res.itemsRead += int(out.ScannedCount)
		for _, item := range out.Items {
			if ctx.Err() != nil {
				return res
			}
			if r.s.foreign(item) {
				continue // another store's (Options.SortKey)
			}
			res.found++
			switch err := r.clear(ctx, shard, item); {
			case err == nil:
				res.cleared++
			case errors.Is(err, errChanged):
				res.skipped++
			case ctx.Err() != nil:
				return res
			default:
				res.errs = append(res.errs, err)
			}
		}
		if len(out.LastEvaluatedKey) == 0 {
			res.done = true
			return res
		}
		start = out.LastEvaluatedKey
	}
}

// errChanged marks a candidate that changed between query and update.
var errChanged = errors.New("record changed")

// clear retires one candidate from the index if it is still stranded, and
// logs it.
func (r *reaper) clear(ctx context.Context, shard int, item map[string]types.AttributeValue) error {
	a := r.s.attr
	key, found, err := r.s.storedKey(ctx, fmt.Sprintf("reap shard %d", shard), item)
	switch {
	case err != nil:
		return fmt.Errorf("dynamostore: reap shard %d: %w", shard, err)
	case !found:
		return errChanged
	}
	d := decoder{item: item}
	owner := d.str(a.Owner, true)
	status := d.str(a.Status, false)
	lease := time.UnixMilli(d.num(a.LeaseExpiresAt))
	created := time.UnixMilli(d.num(a.CreatedAt))
	if d.err != nil {
		return fmt.Errorf("dynamostore: reap shard %d: %w", shard, d.err)
	}
	if status != string(dedupe.StatusInProgress) {
		return errChanged
	}
	if got := r.s.Shard(key); got != shard {
		return fmt.Errorf("dynamostore: reap %s: filed under shard %d, but %d of %d shards: %w",
			dedupe.KeyRef(key), shard, got, r.s.shards, ErrShardMismatch)
	}
	if r.o.BeforeDelete != nil {
		r.o.BeforeDelete(ctx, key)
	}
	_, err = r.s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:           aws.String(r.s.table),
		Key:                 r.s.key(key),
		UpdateExpression:    aws.String("SET #shard = :retired"),
		ConditionExpression: aws.String("#shard = :shard AND #status = :inprog AND #owner = :owner AND #lease < :cutoff"),
		ExpressionAttributeNames: map[string]string{
			"#status": a.Status,
			"#owner":  a.Owner,
			"#lease":  a.LeaseExpiresAt,
			"#shard":  a.InflightShard,
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":shard":   num(int64(shard)),
			":retired": num(int64(retiredShard(shard))),
			":inprog":  str(string(dedupe.StatusInProgress)),
			":owner":   str(owner),
			":cutoff":  num(r.cutoff),
		},
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		r.o.Logger.DebugContext(ctx, "dedupe: stranded record changed, skipped", "key", dedupe.KeyRef(key), "owner", owner)
		return errChanged
	}
	if err != nil {
		return wrapErr("reap", key, err)
	}
	age := r.now.Sub(created)
	level := slog.LevelInfo
	if age > r.o.WarnAge {
		level = slog.LevelWarn
	}
	r.o.Logger.LogAttrs(ctx, level, "dedupe: cleared stranded record",
		slog.String("key", dedupe.KeyRef(key)),
		slog.String("owner", owner),
		slog.Int("shard", shard),
		slog.String("age", age.Round(time.Millisecond).String()),
		slog.String("past_lease", r.now.Sub(lease).Round(time.Millisecond).String()),
		slog.String("created_at", created.UTC().Format(time.RFC3339Nano)),
	)
	return nil
}
