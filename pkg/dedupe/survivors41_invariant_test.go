package dedupe_test

import (
	"context"
	"encoding/json"
	"errors"
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
