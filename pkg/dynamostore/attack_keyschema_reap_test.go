package dynamostore_test

import (
	"context"
	"crypto/rand"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/smithy-go"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/dynamostore"
)

// TestAttackReapLongKeysWithTheReapersGrants states: the reaper finds
// and retires every stranded record of the template's table (keyed by
// reference) with the grants its role has (template.yaml's
// ReaperFunction: Query on the in-flight index, UpdateItem and
// DescribeTable on the table; no GetItem), a record whose key is too
// long for the sort key included, and a run in which a record changed
// since the Query leaves it alone (the fence on its owner token). It
// reads what it needs from the index, whose projection carries
// Attributes.LongKey for that.
func TestAttackReapLongKeysWithTheReapersGrants(t *testing.T) {
	r := newRig(t)
	var gets atomic.Int64
	// The reaper's role: no GetItem.
	reaper := faultClient{Client: r.client, fail: func(op string) error {
		if op == "GetItem" {
			gets.Add(1)
			return &smithy.GenericAPIError{Code: "AccessDeniedException", Message: "not authorized to perform: dynamodb:GetItem"}
		}
		return nil
	}}
	writer := r.store(t, dynamostore.Options{})
	rs, err := dynamostore.New(reaper, dynamostore.Options{Table: r.table})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	long := "reap-long/" + rand.Text() + "/" + strings.Repeat("ü", 700)
	short := "reap-short/" + rand.Text()
	taken := "reap-long-taken/" + rand.Text() + "/" + strings.Repeat("ü", 700)
	for _, k := range []string{long, short, taken} {
		if _, err := writer.Claim(ctx, dedupe.ClaimRequest{Key: k, Fingerprint: "f", Token: "dead", Now: base, LeaseUntil: base.Add(time.Second), ExpiresAt: base.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	later := base.Add(time.Hour / 2)
	rep, err := rs.Reap(ctx, dynamostore.ReapOptions{Now: func() time.Time { return later }, Grace: time.Nanosecond,
		BeforeDelete: func(ctx context.Context, key string) {
			if key != taken {
				return
			}
			// A retry takes the record over between the Query and the
			// reaper's update.
			if res, err := writer.Claim(ctx, dedupe.ClaimRequest{Key: taken, Fingerprint: "f", Token: "retry", Now: later, LeaseUntil: later.Add(time.Minute), ExpiresAt: later.Add(time.Hour)}); err != nil || !res.Acquired {
				t.Errorf("takeover = %+v, %v", res, err)
			}
		}})
	if err != nil || rep.Found != 3 || rep.Cleared != 2 || rep.Skipped != 1 || rep.Errors != 0 {
		t.Errorf("Reap with the reaper's grants = %+v, %v; want 3 found, 2 cleared, the one taken over skipped, no errors", rep, err)
	}
	if n := gets.Load(); n != 0 {
		t.Errorf("Reap sent %d GetItem, which the reaper's role may not call", n)
	}
	for _, k := range []string{long, short} {
		if !r.retired(t, k) {
			t.Errorf("%d-byte key: not retired", len(k))
		}
	}
	if rec, err := writer.Get(ctx, taken, later); err != nil || rec.Token != "retry" || !r.inIndex(t, taken) {
		t.Errorf("the record taken over = owner %q, in the index %v, %v; want the retry's, untouched", rec.Token, r.inIndex(t, taken), err)
	}
}
