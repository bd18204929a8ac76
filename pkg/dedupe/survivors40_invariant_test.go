package dedupe_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/memstore"
)

// TestContextPrincipalStableAcrossVersions states that the principal of a
// Lambda authorizer context identified by several fields, which enters
// every stored key of that caller, is the one v0.1.0 derived, characters
// that encoding/json escapes for HTML ('&', '<', '>', U+2028) included:
// the stored key format is stable across versions (docs/versioning.md),
// so a record written before an upgrade is found after it and a retry is
// replayed, not run again. The wants were computed by v0.1.0's
// DefaultPrincipal (tag v0.1.0) from these same events.
func TestContextPrincipalStableAcrossVersions(t *testing.T) {
	tests := []struct {
		name    string
		context string // the authorizer's "lambda" object, as API Gateway sends it
		want    string
	}{
		{"plain ids", `{"userId":"u1","tenantId":"t1"}`,
			"lambda-ids:38143326681ed9fad048b01a622a91b2cc4828bca726edbbad4e0bcf2f473f37"},
		{"ampersand in an email", `{"email":"tom&jerry@example.com","tenantId":"t1"}`,
			"lambda-ids:d1906edd537d23bb5914b2e614977e2a61b85ab7d24b9a654d5506736f0a2bbe"},
		{"angle brackets", `{"userId":"<u1>","tenantId":"t1"}`,
			"lambda-ids:d1855bbb687c649055d9b6dcb55f41fab9ee1f7582dc18d2a6f89e6fd6e92bb6"},
		{"line separator", `{"userId":"u\u20281","tenantId":"t1"}`,
			"lambda-ids:9376abff24e7551f102791d0b22c4d3e319cba9380100b3c2895a5550d893e29"},
		{"number beside a string", `{"accountId":42,"userId":"u1"}`,
			"lambda-ids:dce43e93492823031bfe67092fd45f0377888ee091d2c9802cec1db6b35f3bb6"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ev events.APIGatewayV2HTTPRequest
			raw := `{"requestContext":{"authorizer":{"lambda":` + tt.context + `}}}`
			if err := json.Unmarshal([]byte(raw), &ev); err != nil {
				t.Fatal(err)
			}
			if got := dedupe.DefaultPrincipal(&ev); got != tt.want {
				t.Errorf("DefaultPrincipal = %q, want %q (v0.1.0's)", got, tt.want)
			}
		})
	}
}

// TestLeaseHeldThroughItsLastMillisecond states the lease boundary every
// store applies (memstore; dynamostore's "#lease < :nowms"; redisstore's
// and pgstore's lease < now_ms): a lease is held through the millisecond
// it ends in and has run out from the next one. Record.LeaseExpired,
// Stranded and FreeFor must agree with the stores there, or a guard would
// take over (or wait for) a record that its store still holds (or frees).
func TestLeaseHeldThroughItsLastMillisecond(t *testing.T) {
	end := time.UnixMilli(1764590000123).Add(400 * time.Microsecond) // within ms ...123
	rec := dedupe.Record{
		Status:         dedupe.StatusInProgress,
		Fingerprint:    "fp",
		Token:          "owner",
		LeaseExpiresAt: end,
		ExpiresAt:      end.Add(24 * time.Hour),
	}
	tests := []struct {
		name string
		now  time.Time
		held bool
	}{
		{"a millisecond before", end.Add(-time.Millisecond), true},
		{"the last millisecond, before the instant", time.UnixMilli(1764590000123), true},
		{"the very instant", end, true},
		{"the last millisecond, after the instant", time.UnixMilli(1764590000123).Add(999 * time.Microsecond), true},
		{"the next millisecond", time.UnixMilli(1764590000124), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := rec.LeaseExpired(tt.now); got != !tt.held {
				t.Errorf("LeaseExpired = %v, want %v", got, !tt.held)
			}
			if got := rec.Stranded(tt.now); got != !tt.held {
				t.Errorf("Stranded = %v, want %v", got, !tt.held)
			}
			if got := rec.FreeFor(tt.now, "fp", "retry"); got != !tt.held {
				t.Errorf("FreeFor(same fingerprint, other token) = %v, want %v", got, !tt.held)
			}
		})
	}
}

// TestReplayThatDoesNotDecodeIsAnError states Once's contract for a
// stored value that does not decode into T (the result type changed in a
// deploy while records of the old one are live): the duplicate gets an
// error, so the event is redelivered, never a zero or partial T passed
// off as the first run's answer, and fn is not run again.
func TestReplayThatDoesNotDecodeIsAnError(t *testing.T) {
	ctx := context.Background()
	g := dedupe.New(memstore.New(), nil)
	const payload = `{"amount":1250}`
	if _, err := dedupe.Once(ctx, g, "evt-r", []byte(payload), func(context.Context) (receipt, error) {
		return receipt{ID: "pay_1", Amount: 1250}, nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := dedupe.Once(ctx, g, "evt-s", []byte(payload), func(context.Context) (string, error) {
		return "pay_1", nil
	}); err != nil {
		t.Fatal(err)
	}
	ran := false
	check := func(t *testing.T, replayed bool, err error) {
		t.Helper()
		if err == nil || replayed || ran {
			t.Errorf("replay into another type: replayed %v, err %v, fn ran %v; want an error, no replay, fn not run", replayed, err, ran)
		}
		var conflict *dedupe.ConflictError
		if errors.As(err, &conflict) {
			t.Errorf("err = %v, want a decode error, not a conflict", err)
		}
	}
	t.Run("object into a number", func(t *testing.T) {
		a, err := dedupe.Once(ctx, g, "evt-r", []byte(payload), func(context.Context) (int64, error) {
			ran = true
			return 7, nil
		})
		check(t, a.Replayed, err)
	})
	t.Run("object into a list", func(t *testing.T) {
		a, err := dedupe.Once(ctx, g, "evt-r", []byte(payload), func(context.Context) ([]string, error) {
			ran = true
			return nil, nil
		})
		check(t, a.Replayed, err)
	})
	t.Run("string into a struct", func(t *testing.T) {
		a, err := dedupe.Once(ctx, g, "evt-s", []byte(payload), func(context.Context) (receipt, error) {
			ran = true
			return receipt{}, nil
		})
		check(t, a.Replayed, err)
	})
	t.Run("the stored type still replays", func(t *testing.T) {
		a, err := dedupe.Once(ctx, g, "evt-r", []byte(payload), func(context.Context) (receipt, error) {
			ran = true
			return receipt{}, nil
		})
		if err != nil || !a.Replayed || ran || a.Value != (receipt{ID: "pay_1", Amount: 1250}) {
			t.Errorf("replay = %+v, %v (fn ran %v); want the first run's value", a, err, ran)
		}
	})
}
