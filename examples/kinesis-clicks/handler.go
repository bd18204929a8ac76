package main

import (
	"context"
	"encoding/json"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
)

// Click is one record's data.
type Click struct {
	ID   string `json:"clickId"`
	Page string `json:"page"`
	At   string `json:"at"`
}

// Handler counts every click once. Records are keyed by the click ID the
// browser generated, so a producer's re-put (a new sequence number) is a
// duplicate too; the stream's own retries would be caught by the default
// key, the record's event ID, alone.
type Handler struct {
	Guard *dedupe.Guard
	Count func(context.Context, Click) error
	// Duplicates, when set, is incremented for every duplicate record.
	Duplicates *int
	// ReportBatchItemFailures says that the event source mapping has
	// FunctionResponseTypes [ReportBatchItemFailures]: a failed record is
	// then the checkpoint the shard is retried from. Without it a failed
	// record fails the whole batch, retried from its start (the records
	// counted before are duplicates then).
	ReportBatchItemFailures bool
}

// Lambda returns the Lambda handler of Kinesis batches, built once. The
// first record that fails is the checkpoint Lambda retries the shard
// from (or, without ReportBatchItemFailures, the whole batch is retried);
// the ones after it wait.
func (h *Handler) Lambda() func(context.Context, events.KinesisEvent) (events.KinesisEventResponse, error) {
	cfg := &dedupe.KinesisConfig{
		Key: func(r events.KinesisEventRecord) string {
			var c Click
			if json.Unmarshal(r.Kinesis.Data, &c) != nil {
				return ""
			}
			return "click:" + c.ID
		},
		Fingerprint: func(r events.KinesisEventRecord) ([]byte, error) {
			return dedupe.JSONFields(r.Kinesis.Data, "clickId", "page")
		},
		OnItem: func(o dedupe.ItemOutcome) {
			if o.Status == dedupe.ItemDuplicate && h.Duplicates != nil {
				*h.Duplicates++
			}
		},
		ReportBatchItemFailures: h.ReportBatchItemFailures,
	}
	return dedupe.Kinesis(h.Guard, cfg, func(ctx context.Context, r events.KinesisEventRecord) error {
		var c Click
		if err := json.Unmarshal(r.Kinesis.Data, &c); err != nil {
			return err
		}
		return h.Count(ctx, c)
	})
}
