package dynamostore_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/lambda-dedupe/dedupe/localtest/dynamotest"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/dynamostore"
)

// smallPages is an SDK middleware that makes the server answer every
// Query in pages of at most size items, as DynamoDB does at 1 MB, so that
// a listing's paging is exercised with a handful of items, and counts the
// Queries.
type smallPages struct {
	size int32

	mu      sync.Mutex
	queries int
}

// option returns the client option that installs the middleware.
func (p *smallPages) option() func(*dynamodb.Options) {
	return func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
			return st.Initialize.Add(middleware.InitializeMiddlewareFunc("smallPages",
				func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
					q, ok := in.Parameters.(*dynamodb.QueryInput)
					if !ok {
						return next.HandleInitialize(ctx, in)
					}
					p.mu.Lock()
					p.queries++
					p.mu.Unlock()
					if q.Limit == nil || *q.Limit > p.size {
						c := *q
						c.Limit = aws.Int32(p.size)
						in.Parameters = &c
					}
					return next.HandleInitialize(ctx, in)
				}), middleware.Before)
		})
	}
}

// count returns the Queries made since the last count, and starts again.
func (p *smallPages) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := p.queries
	p.queries = 0
	return n
}

// pagedBudget bounds the Queries of a paged store's client: a listing of
// a few items in pages of one that starts again from its first page
// spends it in half a second.
const pagedBudget = 500

// paged returns a store on r's table whose client gets every Query's
// answer in pages of one item, with a listing budget of pagedBudget.
func (r *rig) paged(t *testing.T, opts dynamostore.Options) (*dynamostore.Store, *smallPages) {
	t.Helper()
	p := &smallPages{size: 1}
	opts.Table = r.table
	s, err := dynamostore.New(dynamotest.Client(t, dynamotest.WithListingBudget(t, pagedBudget), p.option()), opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s, p
}

// TestListingsReadEveryPageOnce: the operators' listings (FindRef, and
// InFlight's listing and its probe of the shards beyond its count) give
// the same answer whatever the server's page size, reading each page
// once: with one item a page, a listing of n items makes n+1 Queries a
// partition at most, never one that starts again from the first page.
// DynamoDB pages at 1 MB, so only a large listing has a second page; the
// test forces one. Mutants that stop after the first page, or never stop,
// fail here.
func TestListingsReadEveryPageOnce(t *testing.T) {
	ctx := context.Background()
	for name, r := range rigs(t) {
		t.Run(name+"/FindRef", func(t *testing.T) {
			s, pages := r.paged(t, dynamostore.Options{})
			const n = 5
			keys := make([]string, n)
			for i := range keys {
				keys[i] = fmt.Sprintf("pages/%d/%s", i, rand.Text())
			}
			dynamostore.SetRefOf(s, func(string) string { return dedupe.KeyRef(keys[0]) })
			for i, k := range keys {
				if _, err := s.Claim(ctx, dedupe.ClaimRequest{Key: k, Fingerprint: "f", Token: "a", Now: base, LeaseUntil: base.Add(time.Minute), ExpiresAt: base.Add(time.Hour)}); err != nil {
					t.Fatal(err)
				}
				if err := s.Complete(ctx, dedupe.CompleteRequest{Key: k, Token: "a", Now: base, ExpiresAt: base.Add(time.Hour),
					Result: dedupe.Result{StatusCode: 200 + i, Body: []byte("ok")}}); err != nil {
					t.Fatal(err)
				}
			}
			pages.count()
			recs, err := s.FindRef(ctx, dedupe.KeyRef(keys[0]), base)
			if err != nil {
				t.Fatalf("FindRef: %v", err)
			}
			if got := recordKeys(recs); fmt.Sprint(got) != fmt.Sprint(sorted(keys)) {
				t.Errorf("FindRef in pages of one = %d keys, want all %d", len(got), n)
			}
			if q := pages.count(); q > n+1 {
				t.Errorf("FindRef made %d Queries for %d items in pages of one; want at most %d", q, n, n+1)
			}
		})
		t.Run(name+"/InFlight", func(t *testing.T) {
			s, pages := r.paged(t, dynamostore.Options{Shards: 1})
			keys, _ := seedInFlight(t, s, stranded{prefix: "pages", n: 6, claimed: 10 * time.Minute, lease: 5 * time.Minute})
			pages.count()
			recs, truncated, err := s.InFlight(ctx, base, 100)
			if err != nil || truncated {
				t.Fatalf("InFlight = %d records, truncated %v, %v", len(recs), truncated, err)
			}
			if got := recordKeys(recs); fmt.Sprint(got) != fmt.Sprint(sorted(keys)) {
				t.Errorf("InFlight in pages of one = %d records, want all %d", len(got), len(keys))
			}
			// Four partitions (shard 0, the probed shard 1, and their
			// retired partitions), each read to its empty last page.
			if q, most := pages.count(), len(keys)+4; q > most {
				t.Errorf("InFlight made %d Queries for %d items in pages of one; want at most %d", q, len(keys), most)
			}
		})
		t.Run(name+"/InFlight probe", func(t *testing.T) {
			// Writers on 2 shards, an operator's store on 1: it probes
			// shard 1, where the expired leftovers of an earlier run sort
			// first (older leases), and a live record of the writers only
			// on a later page.
			writers := r.store(t, dynamostore.Options{Shards: 2})
			inShard1 := func(sp stranded) {
				t.Helper()
				for range 64 {
					keys, _ := seedInFlight(t, writers, sp)
					if v, ok := r.rawItem(t, keys[0])["inflight_shard"].(*types.AttributeValueMemberN); ok && v.Value == "1" {
						return
					}
				}
				t.Fatalf("no %s record in shard 1 after 64 keys", sp.prefix)
			}
			inShard1(stranded{prefix: "leftover", n: 1, claimed: 3 * time.Hour, lease: 10 * time.Minute, expires: time.Hour})
			inShard1(stranded{prefix: "leftover", n: 1, claimed: 3 * time.Hour, lease: 10 * time.Minute, expires: time.Hour})
			inShard1(stranded{prefix: "live", n: 1, claimed: 10 * time.Minute, lease: 5 * time.Minute})
			reader, _ := r.paged(t, dynamostore.Options{Shards: 1})
			recs, _, err := reader.InFlight(ctx, base, 100)
			if !errors.Is(err, dynamostore.ErrShardMismatch) {
				t.Errorf("InFlight with 1 shard = %d records, %v; want ErrShardMismatch (a live record on the probe's third page)", len(recs), err)
			}
			if errors.Is(err, dynamotest.ErrListingBudget) {
				t.Errorf("InFlight's probe never stopped: %d Queries", pagedBudget)
			}
		})
	}
}

// recordKeys returns the records' keys, sorted.
func recordKeys(recs []dedupe.Record) []string {
	out := make([]string, 0, len(recs))
	for _, rec := range recs {
		out = append(out, rec.Key)
	}
	return sorted(out)
}

// sorted returns a sorted copy of keys.
func sorted(keys []string) []string {
	out := append([]string(nil), keys...)
	sort.Strings(out)
	return out
}
