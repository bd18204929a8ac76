package pgstore_test

import (
	"context"
	"crypto/rand"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/pgstore"
)

func withKey(req dedupe.ClaimRequest, k string) dedupe.ClaimRequest {
	req.Key = k
	return req
}

// TestFirstToken checks which claims start a new life (FirstToken is the
// claim's token) and which keep the row's life: a takeover of a stranded
// row and the owner's own re-claim keep it, a claim of an expired row
// starts a new one. Rows without a first token (written before
// 002_first_token.sql) and rows whose owner was changed by a writer of an
// earlier version read without one, and their owner is the life a
// takeover keeps.
func TestFirstToken(t *testing.T) {
	p := newPool(t)
	ctx := context.Background()
	table := newTable(t, p)
	s := newStore(t, p, pgstore.Options{Table: table})
	stranded := base.Add(2 * time.Minute) // past the first claim's lease, inside its expiry
	expired := base.Add(2 * time.Hour)
	claimBy := func(t *testing.T, k, tok string, now time.Time, wantFirst string) {
		t.Helper()
		res, err := s.Claim(ctx, withKey(claim("", "fp", tok, now), k))
		if err != nil || !res.Acquired || res.Record.FirstToken != wantFirst {
			t.Fatalf("claim by %s: %+v, %v; want acquired with FirstToken %s", tok, res, err, wantFirst)
		}
	}
	claimA := func(t *testing.T, k string) { claimBy(t, k, "tok-a", base, "tok-a") }
	exec := func(t *testing.T, sql string, args ...any) {
		t.Helper()
		if _, err := p.Exec(ctx, strings.ReplaceAll(sql, "dedupe_records", table), args...); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name   string
		setup  func(t *testing.T, k string)
		second dedupe.ClaimRequest
		want   string
	}{
		{"fresh key", func(*testing.T, string) {}, claim("", "fp", "tok-a", base), "tok-a"},
		{"own re-claim keeps the life", claimA, claim("", "fp", "tok-a", base.Add(time.Second)), "tok-a"},
		{"takeover keeps the life", claimA, claim("", "fp", "tok-b", stranded), "tok-a"},
		{"expired row starts a new life", claimA, claim("", "fp", "tok-b", expired), "tok-b"},
		{"takeover of a takeover keeps the first", func(t *testing.T, k string) {
			claimA(t, k)
			claimBy(t, k, "tok-x", stranded, "tok-a")
		}, claim("", "fp", "tok-b", stranded.Add(2*time.Minute)), "tok-a"},
		{"row without a first token: its owner is the life", func(t *testing.T, k string) {
			claimA(t, k)
			exec(t, `UPDATE dedupe_records SET first_token = NULL, first_token_owner = NULL, owner = 'tok-old' WHERE key = $1`, []byte(k))
			if rec, err := s.Get(ctx, k, base); err != nil || rec.FirstToken != "" || rec.Life() != "tok-old" {
				t.Fatalf("old row reads as %+v, %v; want no FirstToken, life tok-old", rec, err)
			}
		}, claim("", "fp", "tok-b", stranded), "tok-old"},
		{"owner changed by an earlier version: the stale first token is ignored", func(t *testing.T, k string) {
			claimA(t, k)
			// What a claim by a writer without first_token does to the row.
			exec(t, `UPDATE dedupe_records SET owner = 'tok-old' WHERE key = $1`, []byte(k))
			if rec, err := s.Get(ctx, k, base); err != nil || rec.FirstToken != "" || rec.Life() != "tok-old" {
				t.Fatalf("row reads as %+v, %v; want no FirstToken, life tok-old", rec, err)
			}
		}, claim("", "fp", "tok-b", stranded), "tok-old"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			k := rand.Text()
			tc.setup(t, k)
			res, err := s.Claim(ctx, withKey(tc.second, k))
			if err != nil || !res.Acquired {
				t.Fatalf("claim: %+v, %v; want acquired", res, err)
			}
			if res.Record.FirstToken != tc.want {
				t.Errorf("claim's FirstToken: got %q, want %q", res.Record.FirstToken, tc.want)
			}
			rec, err := s.Get(ctx, k, tc.second.Now)
			if err != nil || rec.FirstToken != tc.want || rec.Token != tc.second.Token {
				t.Errorf("Get: got %+v, %v; want FirstToken %q, Token %q", rec, err, tc.want, tc.second.Token)
			}
		})
	}
}

// TestMigrationUpgrade applies 001 alone, writes a row as an earlier
// version would, then runs CreateSchema (001 and 002): the row is kept
// and reads without a first token, and a claim on it works.
func TestMigrationUpgrade(t *testing.T) {
	p := newPool(t)
	ctx := context.Background()
	table := "dedupetest_" + strings.ToLower(rand.Text()[:12])
	t.Cleanup(func() { p.Exec(context.Background(), "DROP TABLE IF EXISTS "+table) })
	if _, err := p.Exec(ctx, strings.ReplaceAll(pgstore.Migration, "dedupe_records", table)); err != nil {
		t.Fatal(err)
	}
	_, err := p.Exec(ctx, `INSERT INTO `+table+` (key, status, fingerprint, owner, lease_expires_at, expires_at, created_at, updated_at, inflight)
		VALUES ($1, 'IN_PROGRESS', 'fp', 'tok-old', $2, $3, $4, $4, true)`,
		[]byte("k"), base.Add(time.Minute).UnixMilli(), base.Add(time.Hour).Unix(), base.UnixMilli())
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // idempotent
		if err := pgstore.CreateSchema(ctx, p, table); err != nil {
			t.Fatalf("CreateSchema over a 001 table: %v", err)
		}
	}
	s := newStore(t, p, pgstore.Options{Table: table})
	if rec, err := s.Get(ctx, "k", base); err != nil || rec.FirstToken != "" || rec.Token != "tok-old" {
		t.Fatalf("old row after the migration: %+v, %v", rec, err)
	}
	res, err := s.Claim(ctx, claim("k", "fp", "tok-b", base.Add(2*time.Minute)))
	if err != nil || !res.Acquired || res.Record.FirstToken != "tok-old" {
		t.Errorf("takeover of the old row: %+v, %v; want acquired with FirstToken tok-old", res, err)
	}
}

// TestExtend checks that the store renews leases (the guard refuses
// Config.Heartbeat on a store without Extend), in every query mode, and
// that a renewal is fenced: after a takeover the old owner's renewal is
// refused and changes nothing.
func TestExtend(t *testing.T) {
	p := newPool(t)
	ctx := context.Background()
	table := newTable(t, p)
	s := newStore(t, p, pgstore.Options{Table: table})
	ext, ok := any(s).(dedupe.LeaseExtender)
	if !ok {
		t.Fatal("*pgstore.Store does not implement dedupe.LeaseExtender")
	}
	if _, err := s.Claim(ctx, claim("k", "fp", "tok-a", base)); err != nil {
		t.Fatal(err)
	}
	at := base.Add(30 * time.Second)
	err := ext.Extend(ctx, dedupe.ExtendRequest{Key: "k", Token: "tok-a", Now: at, LeaseUntil: at.Add(time.Minute), ExpiresAt: at.Add(3 * time.Hour)})
	if err != nil {
		t.Fatalf("owner's Extend: %v", err)
	}
	var lease, exp int64
	var inflight *bool
	read := func() {
		t.Helper()
		if err := p.QueryRow(ctx, `SELECT lease_expires_at, expires_at, inflight FROM `+table+` WHERE key = $1`, []byte("k")).Scan(&lease, &exp, &inflight); err != nil {
			t.Fatal(err)
		}
	}
	read()
	if lease != at.Add(time.Minute).UnixMilli() || exp != at.Add(3*time.Hour).Unix() || inflight == nil || !*inflight {
		t.Errorf("after Extend: lease %d, expires %d, inflight %v; want %d, %d, true", lease, exp, inflight, at.Add(time.Minute).UnixMilli(), at.Add(3*time.Hour).Unix())
	}
	later := at.Add(2 * time.Minute)
	if res, err := s.Claim(ctx, claim("k", "fp", "tok-b", later)); err != nil || !res.Acquired {
		t.Fatalf("takeover: %+v, %v", res, err)
	}
	read()
	wantLease, wantExp := lease, exp
	err = ext.Extend(ctx, dedupe.ExtendRequest{Key: "k", Token: "tok-a", Now: later, LeaseUntil: later.Add(time.Hour), ExpiresAt: later.Add(5 * time.Hour)})
	if !errors.Is(err, dedupe.ErrLeaseLost) {
		t.Errorf("old owner's Extend after takeover: got %v, want ErrLeaseLost", err)
	}
	read()
	if lease != wantLease || exp != wantExp {
		t.Errorf("refused Extend changed the row: lease %d, expires %d; want %d, %d", lease, exp, wantLease, wantExp)
	}
}
