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

func rec(seq, data string) events.KinesisEventRecord {
	return events.KinesisEventRecord{EventID: "shardId-000000000000:" + seq, EventSource: "aws:kinesis", EventSourceArn: "arn:aws:kinesis:us-east-1:123456789012:stream/clicks",
		Kinesis: events.KinesisRecord{SequenceNumber: seq, PartitionKey: "p", Data: []byte(data)}}
}

func TestLambda(t *testing.T) {
	batch := []events.KinesisEventRecord{
		rec("1", `{"clickId":"c-1","page":"/","at":"10:00"}`),
		rec("2", `{"clickId":"c-2","page":"/buy","at":"10:01"}`),
		rec("3", `{"clickId":"c-1","page":"/","at":"10:02"}`), // the producer re-put c-1
	}
	exampletest.ForEachStore(t, func(t *testing.T, store dedupe.Store) {
		for _, report := range []bool{true, false} {
			t.Run(fmt.Sprintf("ReportBatchItemFailures=%v", report), func(t *testing.T) {
				var counted []string
				dups := 0
				down := true
				h := &Handler{Guard: dedupe.New(store, &dedupe.Config{Prefix: "clicks-" + rand.Text()}), Duplicates: &dups,
					ReportBatchItemFailures: report,
					Count: func(_ context.Context, c Click) error {
						if down && c.ID == "c-2" {
							return errors.New("counter unavailable")
						}
						counted = append(counted, c.ID)
						return nil
					}}
				ctx := context.Background()
				resp, err := h.Lambda()(ctx, events.KinesisEvent{Records: batch})
				if len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != "2" {
					t.Errorf("failures = %+v, want the checkpoint 2", resp.BatchItemFailures)
				}
				if report && err != nil || !report && !errors.Is(err, dedupe.ErrBatchFailed) {
					t.Fatalf("error %v with ReportBatchItemFailures %v", err, report)
				}
				down = false
				retry := batch[1:] // Lambda retries from 2
				wantDups := 1
				if !report {
					retry, wantDups = batch, 2 // the whole batch: c-1 again too
				}
				resp, err = h.Lambda()(ctx, events.KinesisEvent{Records: retry})
				if len(resp.BatchItemFailures) != 0 || err != nil || !slices.Equal(counted, []string{"c-1", "c-2"}) || dups != wantDups {
					t.Errorf("after the retry: failures %+v, %v, counted %v, %d duplicates; want none, [c-1 c-2], %d", resp.BatchItemFailures, err, counted, dups, wantDups)
				}
			})
		}
	})
}
