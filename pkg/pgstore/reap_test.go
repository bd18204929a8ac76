package pgstore_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/pgstore"
)

// inflight reads the inflight column of key: nil when NULL.
func inflight(t *testing.T, c pgstore.Client, table, key string) *bool {
	t.Helper()
	var v *bool
	if err := c.QueryRow(context.Background(), "SELECT inflight FROM "+table+" WHERE key = $1", []byte(key)).Scan(&v); err != nil {
		t.Fatalf("inflight of %s: %v", key, err)
	}
	return v
}

func TestReap(t *testing.T) {
	p := newPool(t)
	ctx := context.Background()
	table := newTable(t, p)
	s := newStore(t, p, pgstore.Options{Table: table})
	now := base.Add(24 * time.Hour)

	// Expired: completed a day ago with an hour's retention, and an
	// in-flight record whose own expiry has passed.
	for i := range 3 {
		k := fmt.Sprintf("expired-%d", i)
		if _, err := s.Claim(ctx, claim(k, "fp", "tok", base)); err != nil {
			t.Fatal(err)
		}
		if err := s.Complete(ctx, dedupe.CompleteRequest{Key: k, Token: "tok", Now: base, ExpiresAt: base.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Claim(ctx, claim("expired-inflight", "fp", "tok", base)); err != nil {
		t.Fatal(err)
	}
	// Live: completed, in flight within its lease, and stranded (lease
	// ran out 10 minutes ago) or just past its lease (within the grace).
	mk := func(k string, claimedAgo, lease time.Duration) {
		t.Helper()
		at := now.Add(-claimedAgo)
		req := dedupe.ClaimRequest{Key: k, Fingerprint: "fp", Token: "tok-" + k, Now: at, LeaseUntil: at.Add(lease), ExpiresAt: at.Add(24 * time.Hour)}
		if _, err := s.Claim(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	mk("live-completed", time.Minute, time.Minute)
	if err := s.Complete(ctx, dedupe.CompleteRequest{Key: "live-completed", Token: "tok-live-completed", Now: now, ExpiresAt: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	mk("in-lease", 10*time.Second, time.Minute)
	mk("within-grace", 80*time.Second, time.Minute)
	mk("stranded-1", 11*time.Minute, time.Minute)
	mk("stranded-2", time.Hour, time.Minute)
	// Released: its lease ended at once, but it left the in-flight index
	// on release, so Reap has nothing to retire.
	mk("released", 11*time.Minute, time.Minute)
	if err := s.Release(ctx, "released", "tok-released"); err != nil {
		t.Fatal(err)
	}

	report, err := s.Reap(ctx, pgstore.ReapOptions{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	if report.Deleted != 4 || report.Retired != 2 || report.Truncated {
		t.Errorf("report = %+v, want 4 deleted, 2 retired, not truncated", report)
	}
	var left []string
	rows, err := p.Query(ctx, "SELECT convert_from(key, 'UTF8') FROM "+table+" ORDER BY key")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var k string
		rows.Scan(&k)
		left = append(left, k)
	}
	if got, want := strings.Join(left, " "), "in-lease live-completed released stranded-1 stranded-2 within-grace"; got != want {
		t.Errorf("rows left: got %s, want %s", got, want)
	}
	for _, k := range []string{"stranded-1", "stranded-2"} {
		if v := inflight(t, p, table, k); v == nil || *v {
			t.Errorf("%s inflight after Reap: got %v, want false (retired)", k, v)
		}
	}
	if v := inflight(t, p, table, "released"); v != nil {
		t.Errorf("released inflight after Reap: got %v, want NULL", *v)
	}
	// What the reaper retired, InFlight still lists: dedupe stranded
	// finds what the reaper counted.
	recs, truncated, err := s.InFlight(ctx, now, 100)
	listed := map[string]bool{}
	for _, r := range recs {
		listed[string(r.Key)] = r.Stranded(now)
	}
	if err != nil || truncated || len(recs) != 4 || !listed["stranded-1"] || !listed["stranded-2"] || listed["in-lease"] {
		t.Errorf("InFlight after Reap = %v (stranded by key), %v, %v; want stranded-1 and -2 stranded, in-lease and within-grace in flight", listed, truncated, err)
	}
	for _, k := range []string{"in-lease", "within-grace"} {
		if v := inflight(t, p, table, k); v == nil || !*v {
			t.Errorf("%s inflight after Reap: got %v, want true", k, v)
		}
	}

	// A retired record still refuses a different request, and lets the
	// same request take it over, back in flight.
	other := claim("stranded-1", "fp-other", "tok-x", now)
	if res, err := s.Claim(ctx, other); err != nil || res.Acquired || res.Record.Fingerprint != "fp" {
		t.Errorf("different request on a retired record: %+v, %v; want refused", res, err)
	}
	if res, err := s.Claim(ctx, claim("stranded-1", "fp", "tok-y", now)); err != nil || !res.Acquired {
		t.Errorf("same request on a retired record: %+v, %v; want acquired", res, err)
	}
	if v := inflight(t, p, table, "stranded-1"); v == nil || !*v {
		t.Errorf("inflight after takeover: got %v, want true", v)
	}

	// A second run finds nothing.
	report, err = s.Reap(ctx, pgstore.ReapOptions{Now: func() time.Time { return now }})
	if err != nil || report.Deleted != 0 || report.Retired != 0 {
		t.Errorf("second run: %+v, %v; want nothing to do", report, err)
	}
}

func TestReapBatches(t *testing.T) {
	p := newPool(t)
	ctx := context.Background()
	s := newStore(t, p, pgstore.Options{})
	for i := range 5 {
		k := fmt.Sprintf("k%d", i)
		req := claim(k, "fp", "tok", base)
		req.ExpiresAt = base.Add(time.Duration(i+1) * time.Minute)
		if _, err := s.Claim(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	now := base.Add(time.Hour)
	report, err := s.Reap(ctx, pgstore.ReapOptions{Now: func() time.Time { return now }, BatchSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	// Deletes: 2, 2, 1 (the short batch ends the pass); retirements: 0.
	if report.Deleted != 5 || report.Statements != 4 {
		t.Errorf("report = %+v, want 5 deleted in 3 batches plus 1 retirement statement", report)
	}
}

func TestReapDeadline(t *testing.T) {
	p := newPool(t)
	s := newStore(t, p, pgstore.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	report, err := s.Reap(ctx, pgstore.ReapOptions{Margin: time.Minute})
	if err != nil || !report.Truncated || report.Statements != 0 {
		t.Errorf("Reap inside its margin: %+v, %v; want truncated before any statement", report, err)
	}
}

// TestReapUsesIndexes seeds a table of 20,000 completed rows and checks
// the plans of Reap's two statements and InFlight's: index scans on
// expires_at, on the partial in-flight index and on the index of retired
// rows, never a sequential scan of the table.
func TestReapUsesIndexes(t *testing.T) {
	p := newPool(t)
	ctx := context.Background()
	table := newTable(t, p)
	_, err := p.Exec(ctx, `INSERT INTO `+table+` (key, status, fingerprint, owner, lease_expires_at, expires_at, created_at, updated_at, res_status)
		SELECT convert_to('seed-' || i, 'UTF8'), 'COMPLETED', 'fp', 'tok', 0, 2000000000 + i, 0, 0, 200 FROM generate_series(1, 20000) i`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Exec(ctx, "ANALYZE "+table); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, sql, index string
	}{
		{"delete expired", pgstore.ReapExpiredSQL(table), table + "_expires_at_idx"},
		{"retire stranded", pgstore.RetireStrandedSQL(table), table + "_inflight_idx"},
		{"list in flight", pgstore.InFlightSQL(table), table + "_inflight_idx"},
		{"list retired", pgstore.InFlightSQL(table), table + "_retired_idx"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rows, err := p.Query(ctx, "EXPLAIN "+strings.NewReplacer("$1::bigint", "2000000100", "$2::integer", "500", "$2::bigint", "100").Replace(tt.sql))
			if err != nil {
				t.Fatal(err)
			}
			var plan []string
			for rows.Next() {
				var l string
				rows.Scan(&l)
				plan = append(plan, l)
			}
			text := strings.Join(plan, "\n")
			if strings.Contains(text, "Seq Scan") || !strings.Contains(text, tt.index) {
				t.Errorf("plan scans the table or misses %s:\n%s", tt.index, text)
			}
		})
	}
}
