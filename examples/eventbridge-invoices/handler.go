package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
)

// OrderPlaced is the detail of an OrderPlaced event.
type OrderPlaced struct {
	OrderID string `json:"orderId"`
	Total   int64  `json:"total"`
}

// Handler issues one invoice per event. EventBridge keeps an event's ID
// across its own retries, so the ID is the key and the detail the
// fingerprint. (A producer that may put the same business event twice
// gets two IDs: key by Detail's orderId then, as sqs-orders does.)
type Handler struct {
	Guard *dedupe.Guard
	Issue func(context.Context, OrderPlaced) (invoiceID string, err error)
	Log   *slog.Logger
}

// Handle processes one event. An error makes EventBridge (or the target's
// retry policy and dead-letter queue) deliver it again.
func (h *Handler) Handle(ctx context.Context, ev events.EventBridgeEvent) (string, error) {
	a, err := dedupe.Once(ctx, h.Guard, ev.ID, ev.Detail, func(ctx context.Context) (string, error) {
		var o OrderPlaced
		if err := json.Unmarshal(ev.Detail, &o); err != nil {
			return "", fmt.Errorf("decode detail: %w", err)
		}
		return h.Issue(ctx, o)
	})
	if err != nil {
		return "", err
	}
	if a.Warning != nil {
		h.Log.Warn("invoice issued, not recorded for dedupe", "event", ev.ID, "err", a.Warning)
	}
	h.Log.Info("invoice", "event", ev.ID, "invoice", a.Value, "replayed", a.Replayed)
	return a.Value, nil
}
