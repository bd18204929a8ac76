package dynamostore_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambda-dedupe/dedupe/localtest/dynamotest"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/dynamostore"
)

// seedCompleted writes n COMPLETED records, as Complete leaves them, with
// BatchWriteItem (8 writers, 25 items a batch). Their expiry is after
// base, except that expiredEvery > 0 makes every expiredEvery-th one
// expired (still stored, as DynamoDB's TTL is lazy and dynalite has none).
func seedCompleted(tb testing.TB, c *dynamodb.Client, table string, n, expiredEvery int) {
	tb.Helper()
	ms := strconv.FormatInt(base.Add(-time.Hour).UnixMilli(), 10)
	item := func(i int) map[string]types.AttributeValue {
		exp := base.Add(24 * time.Hour)
		if expiredEvery > 0 && i%expiredEvery == 0 {
			exp = base.Add(-time.Minute)
		}
		k := fmt.Sprintf("seed/completed/%07d", i)
		return map[string]types.AttributeValue{
			"pk":               &types.AttributeValueMemberS{Value: k},
			"ref":              &types.AttributeValueMemberS{Value: dedupe.KeyRef(k)},
			"status":           &types.AttributeValueMemberS{Value: "COMPLETED"},
			"fingerprint":      &types.AttributeValueMemberS{Value: "fp"},
			"owner":            &types.AttributeValueMemberS{Value: "owner-" + strconv.Itoa(i)},
			"lease_expires_at": &types.AttributeValueMemberN{Value: ms},
			"expires_at":       &types.AttributeValueMemberN{Value: strconv.FormatInt(exp.Unix(), 10)},
			"created_at":       &types.AttributeValueMemberN{Value: ms},
			"updated_at":       &types.AttributeValueMemberN{Value: ms},
			"res_status":       &types.AttributeValueMemberN{Value: "201"},
			"res_body":         &types.AttributeValueMemberB{Value: []byte(`{"id":"pay_` + strconv.Itoa(i) + `"}`)},
			"res_encoding":     &types.AttributeValueMemberS{Value: "identity"},
			"res_omitted":      &types.AttributeValueMemberBOOL{Value: false},
		}
	}
	batches := make(chan []types.WriteRequest)
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for reqs := range batches {
				for len(reqs) > 0 {
					out, err := c.BatchWriteItem(context.Background(), &dynamodb.BatchWriteItemInput{
						RequestItems: map[string][]types.WriteRequest{table: reqs},
					})
					if err != nil {
						errs <- err
						return
					}
					reqs = out.UnprocessedItems[table]
				}
			}
		}()
	}
	for i := 0; i < n; i += 25 {
		var reqs []types.WriteRequest
		for j := i; j < min(i+25, n); j++ {
			reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: item(j)}})
		}
		select {
		case batches <- reqs:
		case err := <-errs:
			close(batches)
			wg.Wait()
			tb.Fatalf("seed: %v", err)
		}
	}
	close(batches)
	wg.Wait()
	select {
	case err := <-errs:
		tb.Fatalf("seed: %v", err)
	default:
	}
}

// stranded describes in-flight records to seed through the store, relative
// to base.
type stranded struct {
	prefix  string
	n       int
	claimed time.Duration // claim time before base
	lease   time.Duration
	expires time.Duration // record expiry after the claim; 0 means an hour after the lease
}

// seedInFlight claims records as the guard would have, and returns their
// keys and tokens.
func seedInFlight(tb testing.TB, s *dynamostore.Store, specs ...stranded) (keys, tokens []string) {
	tb.Helper()
	for _, sp := range specs {
		for i := range sp.n {
			at := base.Add(-sp.claimed)
			exp := at.Add(sp.lease + time.Hour)
			if sp.expires != 0 {
				exp = at.Add(sp.expires)
			}
			key := fmt.Sprintf("seed/%s/%d/%s", sp.prefix, i, rand.Text()[:8])
			tok := "tok-" + rand.Text()[:8]
			res, err := s.Claim(context.Background(), dedupe.ClaimRequest{
				Key: key, Fingerprint: "fp", Token: tok, Now: at, LeaseUntil: at.Add(sp.lease), ExpiresAt: exp,
			})
			if err != nil || !res.Acquired {
				tb.Fatalf("seed claim %s: %+v, %v", key, res, err)
			}
			keys = append(keys, key)
			tokens = append(tokens, tok)
		}
	}
	return keys, tokens
}

// exists reports whether an item is stored for key, expired or not.
func (r *rig) exists(t testing.TB, key string) bool {
	return len(r.rawItem(t, key)) > 0
}

// inIndex reports whether the item for key is in a shard of the
// in-flight index that Reap queries: it is stored and carries an
// inflight_shard of 0 or more.
func (r *rig) inIndex(t testing.TB, key string) bool {
	v, ok := r.rawItem(t, key)["inflight_shard"].(*types.AttributeValueMemberN)
	return ok && !strings.HasPrefix(v.Value, "-")
}

// retired reports whether a stranded record was retired as Reap retires
// it: still stored (so a different request still gets 422), in the
// retired partition of its shard (inflight_shard -1 - shard), where
// Reap never looks again and InFlight (dedupe stranded) still does.
func (r *rig) retired(t testing.TB, key string) bool {
	v, ok := r.rawItem(t, key)["inflight_shard"].(*types.AttributeValueMemberN)
	return ok && strings.HasPrefix(v.Value, "-")
}

// logLines decodes JSON log lines.
func logLines(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var lines []map[string]any
	dec := json.NewDecoder(buf)
	for dec.More() {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			t.Fatalf("log line: %v", err)
		}
		lines = append(lines, m)
	}
	return lines
}

func TestReap(t *testing.T) {
	r := newRig(t)
	s := r.store(t, dynamostore.Options{})
	seedCompleted(t, r.client, r.table, 2000, 100)
	strandedKeys, strandedTokens := seedInFlight(t, s,
		stranded{prefix: "recent", n: 6, claimed: 5 * time.Minute, lease: time.Minute},
		stranded{prefix: "old", n: 3, claimed: time.Hour, lease: time.Minute},
		// Expired but still stored (TTL is lazy): still in the index.
		stranded{prefix: "expired", n: 1, claimed: 2 * time.Hour, lease: time.Minute, expires: time.Hour},
	)
	liveKeys, _ := seedInFlight(t, s,
		stranded{prefix: "live", n: 3, claimed: 0, lease: 5 * time.Minute},
		// Lease ran out 10s ago: within the grace, not yet stranded.
		stranded{prefix: "grace", n: 2, claimed: 70 * time.Second, lease: time.Minute},
	)

	var logs bytes.Buffer
	report, err := s.Reap(context.Background(), dynamostore.ReapOptions{
		Now:     func() time.Time { return base },
		Grace:   30 * time.Second,
		WarnAge: 15 * time.Minute,
		Logger:  slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		t.Fatalf("Reap: %v", err)
	}
	want := dynamostore.ReapReport{Found: 10, Cleared: 10, Pages: dynamostore.DefaultShards, ItemsRead: 10}
	if !equalReport(report, want) {
		t.Errorf("got %+v, want %+v", report, want)
	}
	for _, k := range strandedKeys {
		if !r.retired(t, k) {
			t.Errorf("stranded %s: stored %v, in index %v; want stored and out of the index", k, r.exists(t, k), r.inIndex(t, k))
		}
	}
	for _, k := range liveKeys {
		if !r.inIndex(t, k) {
			t.Errorf("in-flight %s was cleared", k)
		}
	}
	for _, k := range []string{"seed/completed/0000000", "seed/completed/0000001", "seed/completed/0001999"} {
		if !r.exists(t, k) {
			t.Errorf("completed %s was cleared", k)
		}
	}

	lines := logLines(t, &logs)
	if len(lines) != 10 {
		t.Fatalf("got %d log lines, want 10", len(lines))
	}
	warned := 0
	refs := make([]string, len(strandedKeys))
	for i, k := range strandedKeys {
		refs[i] = dedupe.KeyRef(k)
	}
	for _, l := range lines {
		i := slices.Index(refs, fmt.Sprint(l["key"]))
		if i < 0 || l["owner"] != strandedTokens[i] || l["age"] == nil || l["past_lease"] == nil {
			t.Errorf("log line %v, want key, owner, age, past_lease of a stranded record", l)
		}
		if l["level"] == "WARN" {
			warned++
		}
	}
	if warned != 4 {
		t.Errorf("got %d warnings, want 4 (records older than WarnAge)", warned)
	}
}

// equalReport compares reports, ShardsLeft by content.
func equalReport(a, b dynamostore.ReapReport) bool {
	if !slices.Equal(a.ShardsLeft, b.ShardsLeft) {
		return false
	}
	a.ShardsLeft, b.ShardsLeft = nil, nil
	return reflect.DeepEqual(a, b)
}

// TestReapRace changes records between the query and the delete, through
// the BeforeDelete hook: none of them may be deleted.
func TestReapRace(t *testing.T) {
	r := newRig(t)
	s := r.store(t, dynamostore.Options{})
	keys, tokens := seedInFlight(t, s, stranded{prefix: "race", n: 5, claimed: 10 * time.Minute, lease: time.Minute})
	takeover, completed, released, untouched, staleTakeover := keys[0], keys[1], keys[2], keys[3], keys[4]
	ctx := context.Background()

	var mu sync.Mutex
	var hookErrs []error
	hook := func(ctx context.Context, key string) {
		var err error
		switch key {
		case takeover: // a retry claims the key, whose lease ran out
			_, err = s.Claim(ctx, dedupe.ClaimRequest{Key: key, Fingerprint: "fp", Token: "new-owner",
				Now: base, LeaseUntil: base.Add(time.Minute), ExpiresAt: base.Add(time.Hour)})
		case completed: // the slow owner finishes after all
			err = s.Complete(ctx, dedupe.CompleteRequest{Key: key, Token: tokens[1],
				Result: dedupe.Result{StatusCode: 200}, Now: base, ExpiresAt: base.Add(time.Hour)})
		case released: // the slow owner gives up and releases
			err = s.Release(ctx, key, tokens[2])
		case staleTakeover: // a retry claims the key with a lease that is itself already past the cutoff
			_, err = s.Claim(ctx, dedupe.ClaimRequest{Key: key, Fingerprint: "fp", Token: "stale-owner",
				Now: base.Add(-5 * time.Minute), LeaseUntil: base.Add(-2 * time.Minute), ExpiresAt: base.Add(time.Hour)})
		}
		if err != nil {
			mu.Lock()
			hookErrs = append(hookErrs, fmt.Errorf("%s: %w", key, err))
			mu.Unlock()
		}
	}
	report, err := s.Reap(ctx, dynamostore.ReapOptions{Now: func() time.Time { return base }, BeforeDelete: hook})
	if err != nil {
		t.Fatalf("Reap: %v", err)
	}
	if len(hookErrs) > 0 {
		t.Fatalf("hook: %v", hookErrs)
	}
	want := dynamostore.ReapReport{Found: 5, Cleared: 1, Skipped: 4, Pages: dynamostore.DefaultShards, ItemsRead: 5}
	if !equalReport(report, want) {
		t.Errorf("got %+v, want %+v", report, want)
	}
	if rec, err := s.Get(ctx, takeover, base); err != nil || rec.Token != "new-owner" {
		t.Errorf("taken-over record = %+v, %v; want it kept with the new owner", rec, err)
	}
	// Its lease alone would let the delete through: only the owner read by
	// the query fences it.
	if rec, err := s.Get(ctx, staleTakeover, base); err != nil || rec.Token != "stale-owner" {
		t.Errorf("record taken over with a stale lease = %+v, %v; want it kept with the new owner", rec, err)
	}
	if rec, err := s.Get(ctx, completed, base); err != nil || rec.Status != dedupe.StatusCompleted {
		t.Errorf("completed record = %+v, %v; want it kept COMPLETED", rec, err)
	}
	if !r.retired(t, untouched) {
		t.Errorf("untouched stranded record was not retired")
	}
}

// TestReapGrace checks which lease ends the grace protects, the default
// one included: 30 s, written out so that a change to the default fails
// here.
func TestReapGrace(t *testing.T) {
	leaseEnds := []struct {
		prefix  string
		claimed time.Duration // the lease is a minute
	}{
		{"live", 0},                    // lease ends in a minute
		{"past3s", 63 * time.Second},   // lease ended 3 s ago
		{"past10s", 70 * time.Second},  // 10 s ago
		{"past40s", 100 * time.Second}, // 40 s ago
	}
	tests := []struct {
		name    string
		grace   time.Duration
		cleared []string // prefixes; the others are kept
	}{
		{"zero means 30s", 0, []string{"past40s"}},
		{"configured", 5 * time.Second, []string{"past10s", "past40s"}},
		{"negative means none", -time.Hour, []string{"past3s", "past10s", "past40s"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t)
			s := r.store(t, dynamostore.Options{})
			keys := map[string]string{}
			for _, le := range leaseEnds {
				k, _ := seedInFlight(t, s, stranded{prefix: le.prefix, n: 1, claimed: le.claimed, lease: time.Minute})
				keys[le.prefix] = k[0]
			}
			report, err := s.Reap(context.Background(), dynamostore.ReapOptions{Now: func() time.Time { return base }, Grace: tt.grace})
			if err != nil {
				t.Fatalf("Reap: %v", err)
			}
			if report.Cleared != len(tt.cleared) {
				t.Errorf("got %d cleared, want %d (report %+v)", report.Cleared, len(tt.cleared), report)
			}
			for prefix, k := range keys {
				if got, want := r.inIndex(t, k), !slices.Contains(tt.cleared, prefix); got != want {
					t.Errorf("%s: got in index %v, want %v", prefix, got, want)
				}
				if !r.exists(t, k) {
					t.Errorf("%s: deleted, want kept until it expires", prefix)
				}
			}
		})
	}
}

func TestReapConcurrentRuns(t *testing.T) {
	r := newRig(t)
	s := r.store(t, dynamostore.Options{})
	seedInFlight(t, s, stranded{prefix: "twice", n: 20, claimed: 10 * time.Minute, lease: time.Minute})
	var wg sync.WaitGroup
	reports := make([]dynamostore.ReapReport, 2)
	errs := make([]error, 2)
	for i := range reports {
		wg.Add(1)
		go func() {
			defer wg.Done()
			reports[i], errs[i] = s.Reap(context.Background(), dynamostore.ReapOptions{Now: func() time.Time { return base }})
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("Reap: %v", err)
	}
	if got := reports[0].Cleared + reports[1].Cleared; got != 20 {
		t.Errorf("cleared %d in total, want 20 (reports %+v)", got, reports)
	}
	for _, rep := range reports {
		if rep.Errors != 0 || rep.Found != rep.Cleared+rep.Skipped {
			t.Errorf("report %+v: want no errors and found = cleared + skipped", rep)
		}
	}
}

func TestReapPagination(t *testing.T) {
	r := newRig(t)
	s := r.store(t, dynamostore.Options{Shards: 2})
	seedInFlight(t, s, stranded{prefix: "pages", n: 10, claimed: 10 * time.Minute, lease: time.Minute})
	report, err := s.Reap(context.Background(), dynamostore.ReapOptions{
		Now: func() time.Time { return base }, PageSize: 3, Workers: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	if report.Cleared != 10 || report.ItemsRead != 10 || report.Truncated {
		t.Errorf("got %+v, want 10 cleared, 10 read, not truncated", report)
	}
	// 10 items in pages of 3 over 2 shards: at least 4 pages, at most one
	// extra (empty) page per shard.
	if report.Pages < 4 || report.Pages > 4+2+1 {
		t.Errorf("pages = %d, want 4 to 7", report.Pages)
	}
}

// TestReapDeadline pins ReapOptions.Margin as documented: Reap starts no
// call within Margin of the context's deadline, so that the reaper Lambda
// returns its report before it is killed; zero means DefaultReapMargin
// (2 s), and a Margin larger than the default is honoured, not replaced
// by it. A run with no time makes no call at all, reports every shard
// left, and neither clears nor retires a record.
func TestReapDeadline(t *testing.T) {
	r := newRig(t)
	s := r.store(t, dynamostore.Options{})
	keys, _ := seedInFlight(t, s, stranded{prefix: "deadline", n: 3, claimed: 10 * time.Minute, lease: time.Minute})
	all := []int{0, 1, 2, 3, 4, 5, 6, 7}
	tests := []struct {
		name     string
		deadline time.Duration // from the real now
		margin   time.Duration
	}{
		{"deadline passed", -time.Second, 0},
		{"deadline within the margin", time.Second, 5 * time.Second},
		// 1 s left, under the default 2 s.
		{"zero means 2 s", time.Second, 0},
		// An hour left, under the configured two.
		{"configured above the default", time.Hour, 2 * time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(tt.deadline))
			defer cancel()
			r.calls.reset()
			report, err := s.Reap(ctx, dynamostore.ReapOptions{Now: func() time.Time { return base }, Margin: tt.margin})
			if err != nil {
				t.Fatalf("Reap: %v", err)
			}
			want := dynamostore.ReapReport{Truncated: true, ShardsLeft: all}
			if !equalReport(report, want) {
				t.Errorf("got %+v, want %+v", report, want)
			}
			if ops, _ := r.calls.snapshot(); len(ops) != 0 {
				t.Errorf("calls = %v, want none", ops)
			}
		})
	}
	for _, k := range keys {
		if !r.exists(t, k) {
			t.Errorf("%s cleared by a run that had no time", k)
		}
		if !r.inIndex(t, k) {
			t.Errorf("%s retired by a run that had no time", k)
		}
	}
}

func TestReapStoreUnavailable(t *testing.T) {
	r := newRig(t)
	fc := faultClient{Client: r.client, fail: func(op string) error {
		if op == "Query" {
			return &types.ProvisionedThroughputExceededException{Message: aws.String("injected")}
		}
		return nil
	}}
	s, err := dynamostore.New(fc, dynamostore.Options{Table: r.table})
	if err != nil {
		t.Fatal(err)
	}
	report, err := s.Reap(context.Background(), dynamostore.ReapOptions{Now: func() time.Time { return base }})
	if !errors.Is(err, dedupe.ErrStoreUnavailable) {
		t.Errorf("error = %v, want ErrStoreUnavailable", err)
	}
	if report.Errors != dynamostore.DefaultShards || !report.Truncated || len(report.ShardsLeft) != dynamostore.DefaultShards {
		t.Errorf("got %+v, want an error and a shard left per shard", report)
	}
}

func TestReapSingleTable(t *testing.T) {
	c := testClient(t)
	table := dynamotest.UniqueName("dedupe-single")
	createTable(t, c, table, schema{
		pk: "PK", sk: "SK", shard: "GSI1PK", lease: "lease_expires_at", index: "GSI1",
		projectedKeys: []string{"owner", "status", "created_at"},
	})
	s, err := dynamostore.New(c, dynamostore.Options{
		Table: table, SortKey: dynamostore.SortKey{Name: "SK", Value: "IDEMPOTENCY"},
		Attributes: dynamostore.Attributes{PartitionKey: "PK", InflightShard: "GSI1PK"}, Index: "GSI1",
	})
	if err != nil {
		t.Fatal(err)
	}
	keys, _ := seedInFlight(t, s, stranded{prefix: "single", n: 3, claimed: 10 * time.Minute, lease: time.Minute})
	report, err := s.Reap(context.Background(), dynamostore.ReapOptions{Now: func() time.Time { return base }})
	if err != nil || report.Cleared != 3 {
		t.Fatalf("got %+v, %v; want 3 cleared", report, err)
	}
	for _, k := range keys {
		out, err := c.GetItem(context.Background(), &dynamodb.GetItemInput{
			TableName: aws.String(table),
			Key: map[string]types.AttributeValue{
				"PK": &types.AttributeValueMemberS{Value: k},
				"SK": &types.AttributeValueMemberS{Value: "IDEMPOTENCY"},
			},
			ConsistentRead: aws.Bool(true),
		})
		if err != nil {
			t.Fatal(err)
		}
		item := out.Item
		if v, ok := item["GSI1PK"].(*types.AttributeValueMemberN); !ok || !strings.HasPrefix(v.Value, "-") {
			t.Errorf("item %s = %v; want it kept, in a retired partition of GSI1 (GSI1PK < 0)", k, item)
		}
	}
}
