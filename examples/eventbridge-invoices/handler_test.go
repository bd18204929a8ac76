package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambda-dedupe/dedupe/examples/internal/exampletest"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
)

func TestHandle(t *testing.T) {
	b, err := os.ReadFile("testdata/order-placed.json")
	if err != nil {
		t.Fatal(err)
	}
	var ev events.EventBridgeEvent
	if err := json.Unmarshal(b, &ev); err != nil {
		t.Fatal(err)
	}
	exampletest.ForEachStore(t, func(t *testing.T, store dedupe.Store) {
		issued := 0
		fail := true
		h := &Handler{Guard: dedupe.New(store, &dedupe.Config{Prefix: "invoices-" + rand.Text()}), Log: slog.New(slog.DiscardHandler),
			Issue: func(_ context.Context, o OrderPlaced) (string, error) {
				if fail {
					return "", errors.New("ledger unavailable")
				}
				issued++
				return "inv-" + o.OrderID, nil
			}}
		ctx := context.Background()
		if _, err := h.Handle(ctx, ev); err == nil {
			t.Fatal("first delivery: want the ledger's error, so EventBridge retries")
		}
		fail = false
		for i := range 2 {
			got, err := h.Handle(ctx, ev)
			if err != nil || got != "inv-ord_1001" {
				t.Errorf("delivery %d = %q, %v; want inv-ord_1001", i+2, got, err)
			}
		}
		if issued != 1 {
			t.Errorf("issued %d invoices, want 1", issued)
		}
	})
}
