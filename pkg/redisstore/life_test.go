package redisstore_test

import (
	"context"
	"crypto/rand"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/redisstore"
)

// TestFirstToken checks which claims start a new life (FirstToken is the
// claim's token) and which keep the record's life: a takeover of a
// stranded record and the owner's own re-claim keep it, a claim of an
// expired record starts a new one, and a hash written before the ft field
// existed is taken over with its token as the life.
func TestFirstToken(t *testing.T) {
	c := newClient(t)
	ctx := context.Background()
	prefix := "life:" + rand.Text() + ":"
	s := newStore(t, c, redisstore.Options{Prefix: prefix})
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
	cases := []struct {
		name   string
		setup  func(t *testing.T, k string)
		second dedupe.ClaimRequest
		want   string
	}{
		{"fresh key", func(*testing.T, string) {}, claim("", "fp", "tok-a", base), "tok-a"},
		{"own re-claim keeps the life", claimA, claim("", "fp", "tok-a", base.Add(time.Second)), "tok-a"},
		{"takeover keeps the life", claimA, claim("", "fp", "tok-b", stranded), "tok-a"},
		{"expired record starts a new life", claimA, claim("", "fp", "tok-b", expired), "tok-b"},
		{"takeover of a takeover keeps the first", func(t *testing.T, k string) {
			claimA(t, k)
			claimBy(t, k, "tok-x", stranded, "tok-a")
		}, claim("", "fp", "tok-b", stranded.Add(2*time.Minute)), "tok-a"},
		{"hash without ft: its token is the life", func(t *testing.T, k string) {
			err := c.HSet(ctx, prefix+k, "st", "IN_PROGRESS", "fp", "fp", "tok", "tok-old",
				"lease", ms(base.Add(time.Minute)), "exp", strconv.FormatInt(base.Add(time.Hour).Unix(), 10),
				"cat", ms(base), "uat", ms(base)).Err()
			if err != nil {
				t.Fatal(err)
			}
			if rec, err := s.Get(ctx, k, base); err != nil || rec.FirstToken != "" || rec.Life() != "tok-old" {
				t.Fatalf("old hash reads as %+v, %v; want no FirstToken, life tok-old", rec, err)
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
			if got, _ := c.HGet(ctx, prefix+k, "ft").Result(); got != tc.want {
				t.Errorf("stored ft: got %q, want %q", got, tc.want)
			}
		})
	}
}

func withKey(req dedupe.ClaimRequest, k string) dedupe.ClaimRequest {
	req.Key = k
	return req
}

// TestExtend checks that the store renews leases (the guard refuses
// Config.Heartbeat on a store without Extend), that a renewal moves the
// server TTL with the expiry, and that it is fenced: after a takeover the
// old owner's renewal is refused and changes nothing.
func TestExtend(t *testing.T) {
	c := newClient(t)
	ctx := context.Background()
	prefix := "extend:" + rand.Text() + ":"
	s := newStore(t, c, redisstore.Options{Prefix: prefix, TTLMargin: -1})
	ext, ok := any(s).(dedupe.LeaseExtender)
	if !ok {
		t.Fatal("*redisstore.Store does not implement dedupe.LeaseExtender")
	}
	if _, err := s.Claim(ctx, claim("k", "fp", "tok-a", base)); err != nil {
		t.Fatal(err)
	}
	at := base.Add(30 * time.Second)
	err := ext.Extend(ctx, dedupe.ExtendRequest{Key: "k", Token: "tok-a", Now: at, LeaseUntil: at.Add(time.Minute), ExpiresAt: at.Add(3 * time.Hour)})
	if err != nil {
		t.Fatalf("owner's Extend: %v", err)
	}
	wantTTL := time.Duration(at.Add(3*time.Hour+time.Second).Truncate(time.Second).UnixMilli()) * time.Millisecond
	if ttl, err := c.PExpireTime(ctx, prefix+"k").Result(); err != nil || ttl != wantTTL {
		t.Errorf("PEXPIRETIME after Extend: got %v, %v; want %v", ttl, err, wantTTL)
	}
	// The lease runs out, the same request takes over; the old owner's
	// renewal must not revive its claim.
	later := at.Add(2 * time.Minute)
	if res, err := s.Claim(ctx, claim("k", "fp", "tok-b", later)); err != nil || !res.Acquired {
		t.Fatalf("takeover: %+v, %v", res, err)
	}
	before, _ := c.HGetAll(ctx, prefix+"k").Result()
	err = ext.Extend(ctx, dedupe.ExtendRequest{Key: "k", Token: "tok-a", Now: later, LeaseUntil: later.Add(time.Hour), ExpiresAt: later.Add(5 * time.Hour)})
	if !errors.Is(err, dedupe.ErrLeaseLost) {
		t.Errorf("old owner's Extend after takeover: got %v, want ErrLeaseLost", err)
	}
	if after, _ := c.HGetAll(ctx, prefix+"k").Result(); after["lease"] != before["lease"] || after["exp"] != before["exp"] || after["tok"] != "tok-b" {
		t.Errorf("refused Extend changed the hash: before %v, after %v", before, after)
	}
}
