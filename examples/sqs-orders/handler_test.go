package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambda-dedupe/dedupe/examples/internal/exampletest"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
)

func msg(id, body string) events.SQSMessage {
	return events.SQSMessage{MessageId: id, Body: body, EventSourceARN: "arn:aws:sqs:us-east-1:123456789012:orders"}
}

func TestLambda(t *testing.T) {
	batch := []events.SQSMessage{
		msg("m-1", `{"orderId":"o-1","items":["book"],"sentAt":"10:00:00"}`),
		msg("m-2", `{"orderId":"o-1","items":["book"],"sentAt":"10:00:09"}`), // the producer re-sent it
		msg("m-3", `{"orderId":"o-1","items":["lamp"],"sentAt":"10:01:00"}`), // same ID, other order
		msg("m-4", `not json`),
	}
	want := []dedupe.ItemStatus{dedupe.ItemProcessed, dedupe.ItemDuplicate, dedupe.ItemFailed, dedupe.ItemFailed}
	exampletest.ForEachStore(t, func(t *testing.T, store dedupe.Store) {
		for _, report := range []bool{true, false} {
			t.Run(fmt.Sprintf("ReportBatchItemFailures=%v", report), func(t *testing.T) {
				var shipped []string
				var statuses []dedupe.ItemStatus
				h := &Handler{
					Guard:                   dedupe.New(store, &dedupe.Config{Prefix: "sqs-orders-" + rand.Text()}),
					Ship:                    func(_ context.Context, o Order) error { shipped = append(shipped, o.ID); return nil },
					OnItem:                  func(o dedupe.ItemOutcome) { statuses = append(statuses, o.Status) },
					ReportBatchItemFailures: report,
				}
				resp, err := h.Lambda()(context.Background(), events.SQSEvent{Records: batch})
				var failed []string
				for _, f := range resp.BatchItemFailures {
					failed = append(failed, f.ItemIdentifier)
				}
				if !slices.Equal(shipped, []string{"o-1"}) || !slices.Equal(failed, []string{"m-3", "m-4"}) || !slices.Equal(statuses, want) {
					t.Errorf("shipped %v, failed %v, outcomes %v; want [o-1], [m-3 m-4], %v", shipped, failed, statuses, want)
				}
				// Reporting them, the handler answers with the response;
				// without, it fails the batch, and SQS delivers it all
				// again: o-1 is not shipped twice.
				if report && err != nil || !report && !errors.Is(err, dedupe.ErrBatchFailed) {
					t.Fatalf("error %v with ReportBatchItemFailures %v", err, report)
				}
				if !report {
					h.Lambda()(context.Background(), events.SQSEvent{Records: batch})
					if !slices.Equal(shipped, []string{"o-1"}) {
						t.Errorf("after the whole batch came back: shipped %v, want [o-1]", shipped)
					}
				}
			})
		}
	})
}
