package memstore_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"testing"
	"time"

	"github.com/lambda-dedupe/dedupe/internal/dynamoitem"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/memstore"
)

var base = time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)

// largestBody returns the length of the largest incompressible body that
// fits in a completed item of key and token without headers, in
// dynamostore's accounting.
func largestBody(key, token string) int {
	n := dynamoitem.DefaultNames()
	empty := dynamoitem.CompletedSize(n, dynamoitem.Completed{Key: key, Token: token, Ref: dedupe.KeyRef(key)})
	return dynamoitem.MaxItemBytes - empty - len(n.ResBody) - len(n.ResEncoding) - len(dynamoitem.EncodingIdentity)
}

// TestItemLimits: memstore stores exactly the results dynamostore stores
// with its default options (pkg/dynamostore's TestItemLimits runs the
// same table on dynalite and moto). A 5 MiB response that does not
// compress is omitted, and Complete reports ErrResultTooLarge; the same
// size of zeros is stored compressed; an incompressible body that just
// fits is stored, one byte more is omitted.
func TestItemLimits(t *testing.T) {
	const key, token = "limits", "tok-a"
	fit := largestBody(key, token)
	cases := []struct {
		name    string
		res     dedupe.Result
		omitted bool
	}{
		{"5 MiB random", dedupe.Result{StatusCode: 200, Body: random(t, 5<<20)}, true},
		{"5 MiB of zeros (gzip)", dedupe.Result{StatusCode: 200, Body: make([]byte, 5<<20)}, false},
		{"just fits", dedupe.Result{StatusCode: 200, Body: random(t, fit)}, false},
		{"one byte over", dedupe.Result{StatusCode: 200, Body: random(t, fit+1)}, true},
		{"headers count too", dedupe.Result{StatusCode: 200, Body: random(t, fit-10), Headers: map[string][]string{"X-Pad": {"0123456789"}}}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := memstore.New()
			ctx := context.Background()
			if _, err := s.Claim(ctx, dedupe.ClaimRequest{Key: key, Fingerprint: "fp", Token: token, Now: base,
				LeaseUntil: base.Add(time.Minute), ExpiresAt: base.Add(time.Hour)}); err != nil {
				t.Fatal(err)
			}
			err := s.Complete(ctx, dedupe.CompleteRequest{Key: key, Token: token, Now: base, ExpiresAt: base.Add(time.Hour), Result: tc.res})
			if got := errors.Is(err, dedupe.ErrResultTooLarge); got != tc.omitted || (err != nil && !got) {
				t.Fatalf("Complete: got %v, want ErrResultTooLarge %v", err, tc.omitted)
			}
			rec, err := s.Get(ctx, key, base)
			if err != nil || rec.Status != dedupe.StatusCompleted || rec.ResultOmitted != tc.omitted {
				t.Fatalf("Get: %v, %v, omitted %v; want completed, omitted %v", rec.Status, err, rec.ResultOmitted, tc.omitted)
			}
			if !tc.omitted && (rec.Result == nil || !bytes.Equal(rec.Result.Body, tc.res.Body)) {
				t.Errorf("stored body differs from the result's")
			}
		})
	}
}

func random(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	rand.Read(b)
	return b
}
