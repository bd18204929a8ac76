package main

import (
	"context"
	"encoding/json"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
)

// Order is the message body the producer sends. SentAt changes when the
// producer re-sends the same order.
type Order struct {
	ID     string   `json:"orderId"`
	Items  []string `json:"items"`
	SentAt string   `json:"sentAt"`
}

// Handler ships each order once, however often it is sent.
//
// It keys messages by the order ID, not the message ID: a producer that
// re-publishes an order (its own retry, a replay from an outbox) sends a
// new message with a new ID, which only a business key recognises. Only
// orderId and items are fingerprinted, so a re-send with a fresh sentAt is
// a duplicate, while the same order ID with other items is refused (and
// reaches the dead-letter queue for a human to look at).
type Handler struct {
	Guard *dedupe.Guard
	Ship  func(context.Context, Order) error
	// OnItem, when set, sees every message's outcome (metrics, tests).
	OnItem func(dedupe.ItemOutcome)
	// ReportBatchItemFailures says that the event source mapping has
	// FunctionResponseTypes [ReportBatchItemFailures]: only the failed
	// messages are then delivered again. Without it a failed message
	// fails the whole batch: every message comes back, and those shipped
	// are duplicates, not shipped twice. Set it only with the mapping's
	// setting (make validate flags a mapping without it: E9108).
	ReportBatchItemFailures bool
}

// Lambda returns the Lambda handler of SQS batches, built once.
func (h *Handler) Lambda() func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
	cfg := &dedupe.SQSConfig{
		Key: func(m events.SQSMessage) string {
			var o Order
			if json.Unmarshal([]byte(m.Body), &o) != nil {
				return "" // fails the message
			}
			return "order:" + o.ID
		},
		Fingerprint: func(m events.SQSMessage) ([]byte, error) {
			return dedupe.JSONFields([]byte(m.Body), "orderId", "items")
		},
		OnItem:                  h.OnItem,
		ReportBatchItemFailures: h.ReportBatchItemFailures,
	}
	return dedupe.SQS(h.Guard, cfg, func(ctx context.Context, m events.SQSMessage) error {
		var o Order
		if err := json.Unmarshal([]byte(m.Body), &o); err != nil {
			return err
		}
		return h.Ship(ctx, o)
	})
}
