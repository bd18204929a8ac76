package dynamostore_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/dynamostore"
)

// TestAttackSortKeyValueBounds states what a table keyed by reference
// relies on for every store key (valid UTF-8, up to
// dedupe.MaxStoreKeyBytes): its sort key fits DynamoDB's 1024 bytes, is
// valid UTF-8 (DynamoDB refuses an S that is not), is the key itself
// exactly when the key is at most MaxPlainSortKey bytes, and no two keys
// share one (else one key's record would answer the other). Keys are
// built around every boundary (1019 to 1025 bytes, the longest) with
// runes of one to four bytes straddling the cut of the shortened form,
// beside keys that are the shortened form of another.
func TestAttackSortKeyValueBounds(t *testing.T) {
	var keys []string
	for _, r := range []string{"a", "é", "€", "😀"} {
		for _, n := range []int{1, 940, 948, 949, 950, 951, 952, 953, 1016, 1017, 1018, 1019, 1020, 1021, 1022, 1023, 1024, 1025, 2040} {
			for lead := range min(4, n) {
				// lead ASCII bytes, then runes up to n bytes, then ASCII
				// to make each length exactly.
				k := strings.Repeat("x", lead)
				for len(k)+len(r) <= n {
					k += r
				}
				k += strings.Repeat("y", n-len(k))
				keys = append(keys, k, k[:len(k)-1]+"z")
			}
		}
	}
	// Keys that are the sort key of another key, and keys that share a
	// long prefix.
	for _, k := range keys {
		if sk := dynamostore.SortKeyValue(k); sk != k && len(sk) <= dedupe.MaxStoreKeyBytes {
			keys = append(keys, sk)
		}
	}
	long := strings.Repeat("p", 1500)
	keys = append(keys, long+"1", long+"2", long+"1x")
	seen := map[string]string{}
	for _, k := range keys {
		if err := dedupe.CheckStoreKey(k); err != nil {
			continue // not a store key
		}
		if prev, ok := seen[k]; ok && prev == k {
			continue // built twice
		}
		sk := dynamostore.SortKeyValue(k)
		switch {
		case len(sk) > 1024:
			t.Errorf("%d-byte key: sort key of %d bytes, over DynamoDB's 1024", len(k), len(sk))
		case !utf8.ValidString(sk):
			t.Errorf("%d-byte key: sort key is not valid UTF-8", len(k))
		case (len(k) <= dynamostore.MaxPlainSortKey) != (sk == k):
			t.Errorf("%d-byte key: kept as it is %v, want %v", len(k), sk == k, len(k) <= dynamostore.MaxPlainSortKey)
		}
		if other, ok := seen[sk]; ok && other != k {
			t.Errorf("a %d-byte key and a %d-byte key share the sort key %q", len(k), len(other), sk[max(0, len(sk)-80):])
		}
		seen[sk] = k
		seen[k] = k
	}
}

// TestAttackLongKeysNeverAnswerAnother states the promise never someone
// else's answer for long keys, on both key schemas: two keys over
// MaxPlainSortKey bytes that share everything but their last byte, and a
// key that is the first one's shortened sort key, are three records.
// With the first one completed, a claim of either other (same
// fingerprint) runs fresh, never replays the first one's response; Get
// and FindRef answer each key with its own record only; forgetting one
// leaves the others.
func TestAttackLongKeysNeverAnswerAnother(t *testing.T) {
	for name, r := range rigs(t) {
		t.Run(name, func(t *testing.T) {
			s := r.store(t, dynamostore.Options{})
			ctx := context.Background()
			prefix := "long/" + rand.Text() + "/" + strings.Repeat("€", 400)
			a, b := prefix+"a", prefix+"b"
			c := dynamostore.SortKeyValue(a)
			if len(c) > dedupe.MaxStoreKeyBytes || c == a {
				t.Fatalf("bad test keys")
			}
			claim := func(key, token string) dedupe.ClaimResult {
				t.Helper()
				res, err := s.Claim(ctx, dedupe.ClaimRequest{Key: key, Fingerprint: "same", Token: token, Now: base, LeaseUntil: base.Add(time.Minute), ExpiresAt: base.Add(time.Hour)})
				if err != nil {
					t.Fatalf("Claim: %v", err)
				}
				return res
			}
			if !claim(a, "ta").Acquired {
				t.Fatal("first claim of a not acquired")
			}
			bodyA := bytes.Repeat([]byte("A"), 5000) // compressible: inline
			if err := s.Complete(ctx, dedupe.CompleteRequest{Key: a, Token: "ta", Now: base, ExpiresAt: base.Add(time.Hour), Result: dedupe.Result{StatusCode: 201, Body: bodyA}}); err != nil {
				t.Fatal(err)
			}
			for _, k := range []string{b, c} {
				res := claim(k, "t"+k[len(k)-1:])
				if !res.Acquired || res.Record.Key != k || res.Record.Result != nil {
					t.Errorf("%d-byte key claimed after a's completion: acquired %v, own key %v, result %v; want a fresh claim", len(k), res.Acquired, res.Record.Key == k, res.Record.Result)
				}
			}
			if res := claim(a, "tz"); res.Acquired || res.Record.Key != a || res.Record.Result == nil || !bytes.Equal(res.Record.Result.Body, bodyA) {
				t.Errorf("replay of a: acquired %v, own key %v; want a's own response", res.Acquired, res.Record.Key == a)
			}
			for _, k := range []string{a, b, c} {
				rec, err := s.Get(ctx, k, base)
				if err != nil || rec.Key != k {
					t.Errorf("Get %d-byte key = own key %v, %v", len(k), rec.Key == k, err)
				}
				recs, err := s.FindRef(ctx, dedupe.KeyRef(k), base)
				if err != nil || len(recs) != 1 || recs[0].Key != k {
					t.Errorf("FindRef of a %d-byte key = %d records, %v; want its own only", len(k), len(recs), err)
				}
			}
			if err := s.Forget(ctx, a, "ta"); err != nil {
				t.Fatal(err)
			}
			for _, k := range []string{b, c} {
				if rec, err := s.Get(ctx, k, base); err != nil || rec.Key != k {
					t.Errorf("Get %d-byte key after forgetting a = own key %v, %v", len(k), rec.Key == k, err)
				}
			}
		})
	}
}

// TestAttackLongKeyNewLife states that a record keeps its full key
// through every write that replaces the whole item: a claim over an
// expired record of a long key (the PutItem of a new life) leaves a
// record that reads back under that key, by Get, by FindRef and in
// flight, and that a retry of the same request replays.
func TestAttackLongKeyNewLife(t *testing.T) {
	r := newRig(t)
	s := r.store(t, dynamostore.Options{})
	ctx := context.Background()
	key := "life/" + rand.Text() + "/" + strings.Repeat("界", 400)
	if _, err := s.Claim(ctx, dedupe.ClaimRequest{Key: key, Fingerprint: "f", Token: "old", Now: base, LeaseUntil: base.Add(time.Minute), ExpiresAt: base.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	later := base.Add(2 * time.Hour) // expired
	res, err := s.Claim(ctx, dedupe.ClaimRequest{Key: key, Fingerprint: "g", Token: "new", Now: later, LeaseUntil: later.Add(time.Minute), ExpiresAt: later.Add(time.Hour)})
	if err != nil || !res.Acquired || res.Record.Key != key {
		t.Fatalf("claim over the expired record = acquired %v, own key %v, %v", res.Acquired, res.Record.Key == key, err)
	}
	if rec, err := s.Get(ctx, key, later); err != nil || rec.Key != key || rec.Token != "new" {
		t.Errorf("Get after the new life = own key %v, owner %q, %v", rec.Key == key, rec.Token, err)
	}
	if recs, err := s.FindRef(ctx, dedupe.KeyRef(key), later); err != nil || len(recs) != 1 || recs[0].Key != key {
		t.Errorf("FindRef after the new life = %d records, %v", len(recs), err)
	}
	if err := s.Complete(ctx, dedupe.CompleteRequest{Key: key, Token: "new", Now: later, ExpiresAt: later.Add(time.Hour), Result: dedupe.Result{StatusCode: 202}}); err != nil {
		t.Fatal(err)
	}
	res, err = s.Claim(ctx, dedupe.ClaimRequest{Key: key, Fingerprint: "g", Token: "again", Now: later, LeaseUntil: later.Add(time.Minute), ExpiresAt: later.Add(time.Hour)})
	if err != nil || res.Acquired || res.Record.Key != key || res.Record.Result == nil || res.Record.Result.StatusCode != 202 {
		t.Errorf("replay after the new life = acquired %v, own key %v, %v", res.Acquired, res.Record.Key == key, err)
	}
}

// TestAttackLongKeysLargeResults: on both key schemas, two long keys
// that share all but their last byte, each completed with a response
// too large for an item (LargeResults, S3), replay each its own body
// byte for byte, and Inspect names each its own object.
func TestAttackLongKeysLargeResults(t *testing.T) {
	s3c, bucket := newS3(t, s3Endpoint(t))
	for name, r := range rigs(t) {
		t.Run(name, func(t *testing.T) {
			s := r.store(t, dynamostore.Options{LargeResults: dynamostore.LargeResults{Client: s3c, Bucket: bucket}, CompressAbove: -1})
			ctx := context.Background()
			prefix := "large/" + rand.Text() + "/" + strings.Repeat("ö", 600)
			bodies := map[string][]byte{}
			for _, k := range []string{prefix + "a", prefix + "b"} {
				b := make([]byte, 420<<10) // over the item limit
				rand.Read(b)
				bodies[k] = b
				if _, err := s.Claim(ctx, dedupe.ClaimRequest{Key: k, Fingerprint: "f", Token: "t", Now: base, LeaseUntil: base.Add(time.Minute), ExpiresAt: base.Add(time.Hour)}); err != nil {
					t.Fatal(err)
				}
				if err := s.Complete(ctx, dedupe.CompleteRequest{Key: k, Token: "t", Now: base, ExpiresAt: base.Add(time.Hour), Result: dedupe.Result{StatusCode: 200, Body: b}}); err != nil {
					t.Fatal(err)
				}
			}
			for k, b := range bodies {
				res, err := s.Claim(ctx, dedupe.ClaimRequest{Key: k, Fingerprint: "f", Token: "u", Now: base, LeaseUntil: base.Add(time.Minute), ExpiresAt: base.Add(time.Hour)})
				if err != nil || res.Acquired || res.Record.Key != k || res.Record.Result == nil || !bytes.Equal(res.Record.Result.Body, b) {
					t.Errorf("replay: acquired %v, own key %v, own body %v, %v", res.Acquired, res.Record.Key == k, res.Record.Result != nil && bytes.Equal(res.Record.Result.Body, b), err)
				}
				in, err := s.Inspect(ctx, k, base)
				if err != nil || in.Key != k || in.Object == nil || in.Object.Name != dynamostore.ObjectName("dedupe/", k, "t") {
					t.Errorf("Inspect: own key %v, object %+v, %v; want its own object", in.Key == k, in.Object, err)
				}
			}
		})
	}
}

// TestAttackShortenedKeyWithoutLongKey states that an operator's lookup
// never hides a record: an item of a table keyed by reference whose sort
// key is a shortened form but that carries no Attributes.LongKey (written
// by a store that names the attribute otherwise, or by hand) is
// reported as malformed by FindRef, InFlight and Reap, not skipped as if
// it were gone.
func TestAttackShortenedKeyWithoutLongKey(t *testing.T) {
	r := newRig(t)
	writer := r.store(t, dynamostore.Options{Attributes: dynamostore.Attributes{LongKey: "other_long_key"}})
	s := r.store(t, dynamostore.Options{})
	ctx := context.Background()
	key := "nolong/" + rand.Text() + "/" + strings.Repeat("z", 1100)
	if _, err := writer.Claim(ctx, dedupe.ClaimRequest{Key: key, Fingerprint: "f", Token: "t", Now: base, LeaseUntil: base.Add(time.Minute), ExpiresAt: base.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if recs, err := s.FindRef(ctx, dedupe.KeyRef(key), base); !errors.Is(err, dynamostore.ErrMalformedItem) {
		t.Errorf("FindRef = %d records, %v; want ErrMalformedItem", len(recs), err)
	}
	if recs, _, err := s.InFlight(ctx, base, 100); !errors.Is(err, dynamostore.ErrMalformedItem) {
		t.Errorf("InFlight = %d records, %v; want ErrMalformedItem", len(recs), err)
	}
	// The reaper, whose index gives it no full key here either, counts
	// an error (its alarm), not a record that changed.
	later := base.Add(time.Hour / 2)
	if rep, err := s.Reap(ctx, dynamostore.ReapOptions{Now: func() time.Time { return later }, Grace: time.Nanosecond}); !errors.Is(err, dynamostore.ErrMalformedItem) || rep.Errors != 1 || rep.Skipped != 0 {
		t.Errorf("Reap = %+v, %v; want one error wrapping ErrMalformedItem", rep, err)
	}
}
