package main

import (
	"context"
	"crypto/rand"
	"errors"
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

func TestHandle(t *testing.T) {
	exampletest.ForEachStore(t, func(t *testing.T, store dedupe.Store) {
		var counted []string
		dups := 0
		down := true
		h := &Handler{Guard: dedupe.New(store, &dedupe.Config{Prefix: "clicks-" + rand.Text()}), Duplicates: &dups,
			Count: func(_ context.Context, c Click) error {
				if down && c.ID == "c-2" {
					return errors.New("counter unavailable")
				}
				counted = append(counted, c.ID)
				return nil
			}}
		batch := events.KinesisEvent{Records: []events.KinesisEventRecord{
			rec("1", `{"clickId":"c-1","page":"/","at":"10:00"}`),
			rec("2", `{"clickId":"c-2","page":"/buy","at":"10:01"}`),
			rec("3", `{"clickId":"c-1","page":"/","at":"10:02"}`), // the producer re-put c-1
		}}
		ctx := context.Background()
		resp, _ := h.Handle(ctx, batch)
		if len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != "2" {
			t.Errorf("failures = %+v, want the checkpoint 2", resp.BatchItemFailures)
		}
		down = false
		resp, _ = h.Handle(ctx, events.KinesisEvent{Records: batch.Records[1:]}) // Lambda retries from 2
		if len(resp.BatchItemFailures) != 0 || !slices.Equal(counted, []string{"c-1", "c-2"}) || dups != 1 {
			t.Errorf("after the retry: failures %+v, counted %v, %d duplicates; want none, [c-1 c-2], 1", resp.BatchItemFailures, counted, dups)
		}
	})
}
