package cli_test

import (
	"context"
	"crypto/rand"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lambda-dedupe/dedupe/cmd/dedupe/internal/cli"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
)

// TestAttackLongKeysByRefCLI: on the template's table (keyed by
// reference), a stored key too long for the sort key is shown under its
// full key, whether named by its ref or by --stored-key, and forget
// deletes that record only (fenced by its token): a second long key
// that shares all but its last byte, and so the shortened sort key's
// prefix, keeps its record.
func TestAttackLongKeysByRefCLI(t *testing.T) {
	be := dynamoBackend(t)
	s := be.store
	ctx := context.Background()
	now := time.Now()
	prefix := "long/" + rand.Text() + "/" + strings.Repeat("x", 1400)
	a, b := prefix+"a", prefix+"b"
	for _, k := range []string{a, b} {
		if _, err := s.Claim(ctx, dedupe.ClaimRequest{Key: k, Fingerprint: "f", Token: "tok", Now: now, LeaseUntil: now.Add(time.Minute), ExpiresAt: now.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		if err := s.Complete(ctx, dedupe.CompleteRequest{Key: k, Token: "tok", Now: now, ExpiresAt: now.Add(time.Hour), Result: dedupe.Result{StatusCode: 201}}); err != nil {
			t.Fatal(err)
		}
	}
	flags := be.flags
	for _, name := range [][]string{{dedupe.KeyRef(a)}, {"--stored-key", a}} {
		code, out, errOut := run(t, "", append(append([]string{"show"}, name...), flags...)...)
		if code != cli.ExitOK || !strings.Contains(out, "key:          "+a+"\n") {
			t.Errorf("show %s: exit %d, full key shown %v\n%s", name[0], code, strings.Contains(out, a), errOut)
		}
	}
	if code, _, errOut := run(t, "", append([]string{"forget", dedupe.KeyRef(a), "--token", "other", "--reason", "r", "--yes"}, flags...)...); code == cli.ExitOK {
		t.Errorf("forget with another token: exit 0 (%s)", errOut)
	}
	if code, _, errOut := run(t, "", append([]string{"forget", dedupe.KeyRef(a), "--token", "tok", "--reason", "r", "--yes"}, flags...)...); code != cli.ExitOK {
		t.Fatalf("forget: exit %d (%s)", code, errOut)
	}
	if _, err := s.Get(ctx, a, now); !errors.Is(err, dedupe.ErrNotFound) {
		t.Errorf("the forgotten record: %v, want ErrNotFound", err)
	}
	if rec, err := s.Get(ctx, b, now); err != nil || rec.Key != b {
		t.Errorf("the other long key's record: own key %v, %v; want kept", rec.Key == b, err)
	}
}
