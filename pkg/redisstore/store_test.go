package redisstore_test

import (
	"context"
	"crypto/rand"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lambda-dedupe/dedupe/internal/headerenc"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe/dedupetest"
	"github.com/lambda-dedupe/dedupe/pkg/redisstore"
)

// base is the tests' clock origin, in the future so that the server's TTL
// never removes records mid-test.
var base = time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)

func TestContract(t *testing.T) {
	c := newClient(t)
	dedupetest.Run(t, func(t *testing.T) dedupe.Store { return newStore(t, c, redisstore.Options{}) })
	// The concurrent claims ran on connections of their own.
	t.Logf("connections opened: %d", c.PoolStats().TotalConns)
}

func TestNew(t *testing.T) {
	if _, err := redisstore.New(nil, redisstore.Options{}); !errors.Is(err, redisstore.ErrInvalidOptions) {
		t.Errorf("New(nil): got %v, want ErrInvalidOptions", err)
	}
	// New reads the eviction policy: a server it cannot reach is
	// unavailable, not accepted.
	if _, err := redisstore.New(redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1}), redisstore.Options{}); !errors.Is(err, dedupe.ErrStoreUnavailable) {
		t.Errorf("New on an unreachable server: got %v, want ErrStoreUnavailable", err)
	}
	if _, err := redisstore.New(newClient(t), redisstore.Options{}); err != nil {
		t.Errorf("New with zero Options: %v", err)
	}
}

func ms(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }

func claim(k, fp, tok string, now time.Time) dedupe.ClaimRequest {
	return dedupe.ClaimRequest{Key: k, Fingerprint: fp, Token: tok, Now: now, LeaseUntil: now.Add(time.Minute), ExpiresAt: now.Add(time.Hour)}
}

// TestLayout checks the stored hash field by field, the key prefix, and
// the server TTL: the end of ExpiresAt's second plus the margin.
func TestLayout(t *testing.T) {
	c := newClient(t)
	ctx := context.Background()
	prefix := "layout:" + rand.Text() + ":"
	s := newStore(t, c, redisstore.Options{Prefix: prefix, TTLMargin: 30 * time.Second})
	now := base.Add(250 * time.Millisecond)
	if _, err := s.Claim(ctx, claim("k1", "fp", "tok", now)); err != nil {
		t.Fatal(err)
	}
	rk := prefix + "k1"
	got, err := c.HGetAll(ctx, rk).Result()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"st": "IN_PROGRESS", "fp": "fp", "tok": "tok", "ft": "tok",
		"lease": ms(now.Add(time.Minute)), "exp": strconv.FormatInt(now.Add(time.Hour).Unix(), 10),
		"cat": ms(now), "uat": ms(now),
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("claimed hash: got %v, want %v", got, want)
	}
	// The end of the expiry's second (base is on a whole second), plus
	// the margin.
	wantTTL := time.Duration(base.Add(time.Hour+time.Second+30*time.Second).UnixMilli()) * time.Millisecond
	if ttl, err := c.PExpireTime(ctx, rk).Result(); err != nil || ttl != wantTTL {
		t.Errorf("PEXPIRETIME: got %v, %v; want %v", ttl, err, wantTTL)
	}
	err = s.Complete(ctx, dedupe.CompleteRequest{Key: "k1", Token: "tok", Now: now.Add(time.Second), ExpiresAt: now.Add(24 * time.Hour),
		Result: dedupe.Result{StatusCode: 201, Body: []byte("\x00body")}})
	if err != nil {
		t.Fatal(err)
	}
	got, _ = c.HGetAll(ctx, rk).Result()
	if got["st"] != "COMPLETED" || got["rs"] != "201" || got["rb"] != "\x00body" || got["ro"] != "0" || got["exp"] != strconv.FormatInt(now.Add(24*time.Hour).Unix(), 10) {
		t.Errorf("completed hash: got %q", got)
	}
	if _, ok := got["rh"]; ok {
		t.Errorf("completed hash has rh without headers: %q", got)
	}
	wantTTL = time.Duration(base.Add(24*time.Hour+time.Second+30*time.Second).UnixMilli()) * time.Millisecond
	if ttl, _ := c.PExpireTime(ctx, rk).Result(); ttl != wantTTL {
		t.Errorf("PEXPIRETIME after complete: got %v, want retention's end plus margin", ttl)
	}
}

// TestBinaryResult round-trips header values that are not UTF-8 and a
// binary body, byte for byte.
func TestBinaryResult(t *testing.T) {
	s := newStore(t, newClient(t), redisstore.Options{})
	ctx := context.Background()
	if _, err := s.Claim(ctx, claim("bin", "fp", "tok", base)); err != nil {
		t.Fatal(err)
	}
	want := dedupe.Result{StatusCode: 200, Headers: map[string][]string{
		"Content-Disposition": {"attachment; filename=\"caf\xe9.txt\""},
		"X-Raw":               {"\xff\xfe\x00", ""},
	}, Body: []byte{0, 0xff, 0x80, 0x7f}}
	if err := s.Complete(ctx, dedupe.CompleteRequest{Key: "bin", Token: "tok", Now: base, ExpiresAt: base.Add(time.Hour), Result: want}); err != nil {
		t.Fatal(err)
	}
	rec, err := s.Get(ctx, "bin", base)
	if err != nil || rec.Result == nil {
		t.Fatalf("Get: %+v, %v", rec, err)
	}
	if !reflect.DeepEqual(*rec.Result, want) {
		t.Errorf("got %+q, want %+q", rec.Result.Headers, want.Headers)
	}
}

func TestOmitResult(t *testing.T) {
	ctx := context.Background()
	c := newClient(t)
	big := dedupe.Result{StatusCode: 200, Body: make([]byte, 2000), Headers: map[string][]string{"A": {"b"}}}
	tests := []struct {
		name    string
		opts    redisstore.Options
		omit    bool
		result  dedupe.Result
		wantErr error
		omitted bool
	}{
		{"OmitResult", redisstore.Options{}, true, big, nil, true},
		{"too large", redisstore.Options{MaxResultBytes: 1000}, false, big, dedupe.ErrResultTooLarge, true},
		// The limit is inclusive: headers as stored plus body.
		{"at the limit", redisstore.Options{MaxResultBytes: 2000 + len(headerenc.Encode(big.Headers))}, false, big, nil, false},
		{"one over the limit", redisstore.Options{MaxResultBytes: 2000 + len(headerenc.Encode(big.Headers)) - 1}, false, big, dedupe.ErrResultTooLarge, true},
		{"no limit", redisstore.Options{MaxResultBytes: -1}, false, big, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStore(t, c, tt.opts)
			if _, err := s.Claim(ctx, claim("k", "fp", "tok", base)); err != nil {
				t.Fatal(err)
			}
			err := s.Complete(ctx, dedupe.CompleteRequest{Key: "k", Token: "tok", Now: base, ExpiresAt: base.Add(time.Hour), Result: tt.result, OmitResult: tt.omit})
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Fatalf("Complete: got %v, want %v", err, tt.wantErr)
			}
			res, err := s.Claim(ctx, claim("k", "fp", "tok-2", base.Add(time.Second)))
			if err != nil {
				t.Fatal(err)
			}
			rec := res.Record
			if res.Acquired || rec.Status != dedupe.StatusCompleted || rec.ResultOmitted != tt.omitted || (rec.Result == nil) != tt.omitted {
				t.Errorf("duplicate claim: got %+v, want COMPLETED with omitted %v", res, tt.omitted)
			}
		})
	}
}

func TestKeyRejected(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, newClient(t), redisstore.Options{})
	for _, k := range []string{"", strings.Repeat("k", dedupe.MaxStoreKeyBytes+1), "bad\xff"} {
		_, err := s.Claim(ctx, claim(k, "fp", "tok", base))
		errs := []error{err,
			s.Complete(ctx, dedupe.CompleteRequest{Key: k, Token: "tok", Now: base, ExpiresAt: base}),
			s.Release(ctx, k, "tok"),
		}
		_, err = s.Get(ctx, k, base)
		errs = append(errs, err)
		for i, err := range errs {
			if !errors.Is(err, dedupe.ErrKeyRejected) || errors.Is(err, dedupe.ErrStoreUnavailable) {
				t.Errorf("call %d with a %d-byte key: got %v, want ErrKeyRejected", i, len(k), err)
			}
			if len(k) > 10 && err != nil && strings.Contains(err.Error(), k) {
				t.Errorf("error quotes the key: %v", err)
			}
		}
	}
	if _, err := s.Claim(ctx, claim(strings.Repeat("é", dedupe.MaxStoreKeyBytes/2), "fp", "tok", base)); err != nil {
		t.Errorf("Claim with a %d-byte key: %v", dedupe.MaxStoreKeyBytes, err)
	}
}

// TestMalformed stores hashes the store did not write and checks that
// reading them fails with ErrMalformedRecord, never a panic or a record.
func TestMalformed(t *testing.T) {
	c := newClient(t)
	ctx := context.Background()
	prefix := "malformed:" + rand.Text() + ":"
	s := newStore(t, c, redisstore.Options{Prefix: prefix})
	tests := []struct {
		name   string
		fields []string
	}{
		{"no token", []string{"st", "IN_PROGRESS", "lease", "1", "exp", "1", "cat", "1", "uat", "1"}},
		{"bad number", []string{"st", "IN_PROGRESS", "tok", "t", "lease", "x", "exp", "1", "cat", "1", "uat", "1"}},
		{"bad status", []string{"st", "DONE", "tok", "t", "lease", "1", "exp", "1", "cat", "1", "uat", "1"}},
		{"bad headers", []string{"st", "COMPLETED", "tok", "t", "lease", "1", "exp", "1", "cat", "1", "uat", "1", "rs", "200", "rh", "junk"}},
	}
	for _, tt := range tests {
		k := "k-" + strings.ReplaceAll(tt.name, " ", "-")
		if err := c.HSet(ctx, prefix+k, tt.fields).Err(); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Get(ctx, k, time.Unix(0, 0)); !errors.Is(err, redisstore.ErrMalformedRecord) {
			t.Errorf("%s: Get: got %v, want ErrMalformedRecord", tt.name, err)
		}
		// A claim that meets it got an answer (a record holds the key)
		// it cannot read: permanent, never unavailable, so FailOpen
		// never runs beside it (issue 29, the rule).
		req := claim(k, "fp", "tok", time.Unix(0, 0))
		// (The script itself fails on a field it cannot compare: a
		// script error, permanent too.)
		if res, err := s.Claim(ctx, req); err == nil || errors.Is(err, dedupe.ErrStoreUnavailable) || res.Acquired {
			t.Errorf("%s: Claim: got %+v, %v; want a permanent error (ErrMalformedRecord or the script's), not unavailable", tt.name, res, err)
		}
	}
}
