package dedupe_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/memstore"
)

// TestKeyOfEventGuardedIsTheAdapters states an invariant of KeyOfEvent:
// EventKey.Guarded is true exactly when the adapter built with the same
// HTTPConfig guards the request, whatever the case of the event's method
// (the adapter compares methods case-insensitively) and for the default
// and configured method lists alike.
func TestKeyOfEventGuardedIsTheAdapters(t *testing.T) {
	var base events.APIGatewayProxyRequest
	fixture(t, "apigw-v1-iam.json", &base)
	for _, tt := range []struct {
		name    string
		methods []string
		method  string
	}{
		{"default list, upper case", nil, "POST"},
		{"default list, lower case", nil, "patch"},
		{"default list, mixed case", nil, "DeLeTe"},
		{"default list, unguarded", nil, "GET"},
		{"default list, unguarded lower case", nil, "get"},
		{"configured, letters a and z", []string{"Zazz"}, "zazz"},
		{"configured, other case", []string{"zazz"}, "ZAZZ"},
		{"configured, not listed", []string{"zazz"}, "POST"},
		{"configured, a prefix only", []string{"zaz"}, "zazz"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := &dedupe.HTTPConfig{Methods: tt.methods}
			ev := base
			ev.HTTPMethod = tt.method
			ev.RequestContext.HTTPMethod = tt.method
			guarded := false
			h := dedupe.RESTAPI(dedupe.New(memstore.New(), nil), cfg, func(ctx context.Context, _ events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
				_, guarded = dedupe.ClaimFrom(ctx)
				return events.APIGatewayProxyResponse{StatusCode: 200}, nil
			})
			if _, err := h(context.Background(), ev); err != nil {
				t.Fatal(err)
			}
			got, err := dedupe.KeyOfEvent(cfg, &ev)
			if err != nil {
				t.Fatalf("KeyOfEvent: %v", err)
			}
			if got.Guarded != guarded {
				t.Errorf("KeyOfEvent says Guarded %v for method %q with Methods %q; the adapter guarded: %v", got.Guarded, tt.method, tt.methods, guarded)
			}
		})
	}
}

// TestKeyOfEventRefusesWhatTheAdapterRefuses states an invariant of
// KeyOfEvent: a request the adapter answers 400 for its key (none, or the
// header repeated) gets an error wrapping ErrInvalidKey, never a key.
func TestKeyOfEventRefusesWhatTheAdapterRefuses(t *testing.T) {
	var base events.APIGatewayProxyRequest
	fixture(t, "apigw-v1-iam.json", &base)
	for _, tt := range []struct {
		name   string
		values []string
	}{
		{"no key", nil},
		{"repeated key", []string{"k-1", "k-2"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ev := base
			ev.Headers = map[string]string{}
			ev.MultiValueHeaders = map[string][]string{}
			if tt.values != nil {
				ev.Headers["Idempotency-Key"] = tt.values[len(tt.values)-1]
				ev.MultiValueHeaders["Idempotency-Key"] = tt.values
			}
			got, err := dedupe.KeyOfEvent(nil, &ev)
			if !errors.Is(err, dedupe.ErrInvalidKey) || got.Scoped != "" {
				t.Errorf("KeyOfEvent = %+v, %v; want no key and ErrInvalidKey", got, err)
			}
		})
	}
}

// TestProvenanceBound states the invariant of MaxTraceBytes: a request ID
// or trace of up to MaxTraceBytes bytes is kept as it is, a longer one is
// dropped (never cut).
func TestProvenanceBound(t *testing.T) {
	for _, n := range []int{dedupe.MaxTraceBytes - 1, dedupe.MaxTraceBytes, dedupe.MaxTraceBytes + 1} {
		s := strings.Repeat("t", n)
		want := s
		if n > dedupe.MaxTraceBytes {
			want = ""
		}
		ctx := dedupe.WithRequestID(dedupe.WithTrace(context.Background(), s), s)
		if got := dedupe.TraceFrom(ctx); got != want {
			t.Errorf("trace of %d bytes: got %d bytes, want %d", n, len(got), len(want))
		}
		if got := dedupe.RequestIDFrom(ctx); got != want {
			t.Errorf("request ID of %d bytes: got %d bytes, want %d", n, len(got), len(want))
		}
	}
}

// TestValidRefIsKeyRefsForm states ValidRef's invariant: it accepts
// exactly "key:" and 12 lower-case hex digits, what KeyRef returns, so
// every digit 0-9 and a-f is accepted and the characters just outside
// those ranges are not.
func TestValidRefIsKeyRefsForm(t *testing.T) {
	for _, digits := range []string{"0123456789ab", "cdefcdefcdef", "999999999999", "ffffffffffff", "aaaaaaaaaaaa", "000000000000"} {
		if !dedupe.ValidRef("key:" + digits) {
			t.Errorf("ValidRef(%q) = false, want true", "key:"+digits)
		}
	}
	for _, c := range []string{"/", ":", "`", "g", "A", "F"} {
		ref := "key:01234567890" + c
		if dedupe.ValidRef(ref) {
			t.Errorf("ValidRef(%q) = true, want false", ref)
		}
	}
}
