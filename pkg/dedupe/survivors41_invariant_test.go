package dedupe_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/memstore"
)

// TestReplayDecodeErrorNamesTheFieldNotTheValue states that when a
// stored answer does not decode into the caller's type (the type changed
// between deployments), the error names the field that failed, so an
// operator can find it, and never carries the stored value, which may be
// anyone's data and reaches logs and dead-letter queues; a value that
// fails as a whole names no field.
func TestReplayDecodeErrorNamesTheFieldNotTheValue(t *testing.T) {
	ctx := context.Background()
	g := dedupe.New(memstore.New(), nil)
	type stored struct {
		Amount int64  `json:"amount"`
		Card   string `json:"card"`
	}
	const payload = `{"charge":1}`
	if _, err := dedupe.Once(ctx, g, "evt-1", []byte(payload), func(context.Context) (stored, error) {
		return stored{Amount: 987654321, Card: "4242-secret"}, nil
	}); err != nil {
		t.Fatal(err)
	}
	t.Run("a field of another type", func(t *testing.T) {
		type changed struct {
			Amount string `json:"amount"`
		}
		_, err := dedupe.Once(ctx, g, "evt-1", []byte(payload), func(context.Context) (changed, error) {
			t.Error("the function ran on a replay")
			return changed{}, nil
		})
		if err == nil || !strings.Contains(err.Error(), "(field amount)") {
			t.Errorf("err = %v; want it to name the field amount", err)
		}
		if err != nil && strings.Contains(err.Error(), "987654321") {
			t.Errorf("err = %v: it carries the stored value", err)
		}
	})
	t.Run("the whole value of another type", func(t *testing.T) {
		_, err := dedupe.Once(ctx, g, "evt-1", []byte(payload), func(context.Context) (int64, error) {
			t.Error("the function ran on a replay")
			return 0, nil
		})
		if err == nil || strings.Contains(err.Error(), "(field") {
			t.Errorf("err = %v; want an error that names no field", err)
		}
		if err != nil && (strings.Contains(err.Error(), "987654321") || strings.Contains(err.Error(), "4242")) {
			t.Errorf("err = %v: it carries the stored value", err)
		}
	})
}

// TestHandlerEventBridgeByPointer states that an EventBridge event a
// handler takes by pointer is keyed and scoped as the same event taken
// by value: the same business key from two sources is two requests, each
// redelivery replays its own answer, and a nil event is refused with
// ErrNoKey, never run.
func TestHandlerEventBridgeByPointer(t *testing.T) {
	g := dedupe.New(memstore.New(), &dedupe.Config{Prefix: "t"})
	runs := 0
	h, err := dedupe.Handler(g, &dedupe.HandlerConfig[string]{Key: "detail.orderId"},
		func(_ context.Context, ev *events.EventBridgeEvent) (string, error) {
			runs++
			return ev.Source, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	event := func(source string) *events.EventBridgeEvent {
		return &events.EventBridgeEvent{ID: "e-" + source, Source: source, DetailType: "OrderPlaced",
			AccountID: "123456789012", Region: "eu-west-1", Detail: json.RawMessage(`{"orderId":"ord_1"}`)}
	}
	for _, source := range []string{"com.example.shop", "com.example.billing"} {
		got, err := h(ctx, event(source))
		if err != nil || got != source {
			t.Fatalf("first from %s = %q, %v; want it run", source, got, err)
		}
	}
	for _, source := range []string{"com.example.shop", "com.example.billing"} {
		got, err := h(ctx, event(source))
		if err != nil || got != source {
			t.Errorf("redelivery from %s = %q, %v; want its own answer", source, got, err)
		}
	}
	if runs != 2 {
		t.Errorf("%d runs; want one per source", runs)
	}
	if _, err := h(ctx, nil); !errors.Is(err, dedupe.ErrNoKey) || runs != 2 {
		t.Errorf("nil event: %v after %d runs; want ErrNoKey and no run", err, runs)
	}
}

// TestFreeForItsOwnTokenOnly states who may take an in-flight record
// whose lease still runs: the invocation holding its token (its own
// claim, seen again after an SDK retry of the claim), and no one else,
// an empty token least of all, since a zero value is never an identity:
// a record whose token was lost is not free to every caller without one.
func TestFreeForItsOwnTokenOnly(t *testing.T) {
	now := time.UnixMilli(1764590000000)
	for _, tt := range []struct {
		name        string
		recordToken string
		token       string
		free        bool
	}{
		{"its own token", "owner", "owner", true},
		{"another token", "owner", "other", false},
		{"no token", "owner", "", false},
		{"no token, on a record without one", "", "", false},
		{"a token, on a record without one", "", "owner", false},
	} {
		rec := dedupe.Record{Key: "k", Status: dedupe.StatusInProgress, Fingerprint: "fp", Token: tt.recordToken,
			LeaseExpiresAt: now.Add(time.Minute), ExpiresAt: now.Add(time.Hour)}
		if got := rec.FreeFor(now, "fp", tt.token); got != tt.free {
			t.Errorf("%s: FreeFor = %v, want %v", tt.name, got, tt.free)
		}
	}
}

// TestCheckStoreKeyLimit states the store key's size limit as its doc
// and DynamoDB's sort-key limit do: MaxStoreKeyBytes bytes is a key,
// one more is refused with ErrKeyRejected, on every store alike.
func TestCheckStoreKeyLimit(t *testing.T) {
	if err := dedupe.CheckStoreKey(strings.Repeat("k", dedupe.MaxStoreKeyBytes)); err != nil {
		t.Errorf("a key of MaxStoreKeyBytes bytes: %v, want it accepted", err)
	}
	if err := dedupe.CheckStoreKey(strings.Repeat("k", dedupe.MaxStoreKeyBytes+1)); !errors.Is(err, dedupe.ErrKeyRejected) {
		t.Errorf("a key of MaxStoreKeyBytes+1 bytes: %v, want ErrKeyRejected", err)
	}
}

// TestFingerprintOfAComputedNumberIsExact states that a fingerprint never
// equates two requests that differ: a number the expression computes
// (to_number of a string field) that float64 cannot hold exactly, from
// 2^53 up, would fingerprint neighbouring values alike and replay one
// request's answer to the other, so it is refused with ErrNoFingerprint
// and the handler does not run; below 2^53 it is exact, and neighbours
// are two fingerprints (a reused key is 422, never a replay).
func TestFingerprintOfAComputedNumberIsExact(t *testing.T) {
	type charge struct {
		ID     string `json:"id"`
		Amount string `json:"amount"`
	}
	g := dedupe.New(memstore.New(), &dedupe.Config{Prefix: "t"})
	runs := 0
	h, err := dedupe.Handler(g, &dedupe.HandlerConfig[string]{Key: "id", Fingerprint: "to_number(amount)", Scope: "'billing'"},
		func(_ context.Context, c charge) (string, error) { runs++; return c.Amount, nil })
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i, amount := range []string{"9007199254740992", "9007199254740993", "12345678901234567890"} {
		if _, err := h(ctx, charge{ID: "big-" + strconv.Itoa(i), Amount: amount}); !errors.Is(err, dedupe.ErrNoFingerprint) {
			t.Errorf("amount %s, beyond float64's exact integers: %v, want ErrNoFingerprint", amount, err)
		}
	}
	if runs != 0 {
		t.Fatalf("%d runs on refused fingerprints", runs)
	}
	if got, err := h(ctx, charge{ID: "small", Amount: "9007199254740991"}); err != nil || got != "9007199254740991" {
		t.Fatalf("amount 2^53-1: %q, %v; want it run", got, err)
	}
	if _, err := h(ctx, charge{ID: "small", Amount: "9007199254740990"}); !errors.Is(err, dedupe.ErrFingerprintMismatch) {
		t.Errorf("the same key with amount 2^53-2: %v, want ErrFingerprintMismatch", err)
	}
}

// TestHandlerChecksFunctionsAndBindings states what Handler decides at
// construction about a Key that calls functions or binds variables: an
// error anywhere in a let expression (a binding or its body) is refused
// there, naming it, as it would fail on every event; a function called
// with as many arguments as it takes at most is accepted and keys events
// by what it reads; and a function that always returns a boolean is
// refused as a key whatever its arguments read.
func TestHandlerChecksFunctionsAndBindings(t *testing.T) {
	type order struct {
		Tenant string `json:"tenant"`
		ID     string `json:"id"`
	}
	g := dedupe.New(memstore.New(), &dedupe.Config{Prefix: "t"})
	build := func(key string) (func(context.Context, order) (string, error), error) {
		return dedupe.Handler(g, &dedupe.HandlerConfig[string]{Key: key, Scope: "'orders'"},
			func(_ context.Context, o order) (string, error) { return o.Tenant + "/" + o.ID, nil })
	}
	for _, tt := range []struct{ key, want string }{
		{"let $t = nope(tenant) in [$t, id]", "unknown function nope()"},
		{"let $t = tenant in nope(id)", "unknown function nope()"},
		{"contains(id, 'x')", "always selects null or a boolean, never a key"},
		{"starts_with(id, tenant)", "always selects null or a boolean, never a key"},
	} {
		if _, err := build(tt.key); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Key %q: Handler = %v, want an error containing %q", tt.key, err, tt.want)
		}
	}
	ctx := context.Background()
	for _, key := range []string{"let $t = tenant in [$t, id]", "join('-', [tenant, id])"} {
		h, err := build(key)
		if err != nil {
			t.Errorf("Key %q: Handler = %v, want it accepted", key, err)
			continue
		}
		a, errA := h(ctx, order{Tenant: "acme", ID: "1"})
		b, errB := h(ctx, order{Tenant: "globex", ID: "1"})
		if errA != nil || errB != nil || a != "acme/1" || b != "globex/1" {
			t.Errorf("Key %q: two tenants' order 1 = %q, %v and %q, %v; want each its own answer", key, a, errA, b, errB)
		}
	}
}

// TestKeyNumberDigitsBound states the bound on a whole number in a key
// as maxKeyDigits' doc gives it: 400 digits is a key, written out or
// with an exponent, and 401 is refused with ErrNoKey, so that an
// exponent cannot make a key of unbounded size.
func TestKeyNumberDigitsBound(t *testing.T) {
	key := func(n string) error {
		_, err := dedupe.MustCompileExpr("n").Key([]byte(`{"n": ` + n + `}`))
		return err
	}
	for _, n := range []string{"1" + strings.Repeat("0", 399), "1e399", "-1e399"} {
		if err := key(n); err != nil {
			t.Errorf("a whole number of 400 digits (%.12s…): %v, want a key", n, err)
		}
	}
	for _, n := range []string{"1" + strings.Repeat("0", 400), "1e400"} {
		if err := key(n); !errors.Is(err, dedupe.ErrNoKey) {
			t.Errorf("a whole number of 401 digits (%.12s…): %v, want ErrNoKey", n, err)
		}
	}
}

// TestEmptyProjectionReadsTheEvent states that a projection that kept no
// element is as much the event's as the list it projected: beside a
// field in an object, it does not make the object a mix of literals and
// fields, so the field picked out of it is a key.
func TestEmptyProjectionReadsTheEvent(t *testing.T) {
	e := dedupe.MustCompileExpr("{none: items[?x == 'none'].x, id: id}.id")
	for _, id := range []string{"a", "b"} {
		if _, err := e.Key([]byte(`{"id": "` + id + `", "items": [{"x": "a"}]}`)); err != nil {
			t.Errorf("id %s: %v, want a key", id, err)
		}
	}
	// A projection with no condition over an empty list keeps nothing
	// of the event either, and nothing of a literal.
	e = dedupe.MustCompileExpr("{none: items[*].x, id: id}.id")
	for _, id := range []string{"a", "b"} {
		if _, err := e.Key([]byte(`{"id": "` + id + `", "items": []}`)); err != nil {
			t.Errorf("empty items, id %s: %v, want a key", id, err)
		}
	}
}
