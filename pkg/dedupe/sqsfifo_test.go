package dedupe_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/memstore"
)

// fifoFixture is a FIFO batch of seven messages in three interleaved
// groups: A1 B1 A2 B2 C1 B3 A3.
func fifoFixture(t *testing.T) events.SQSEvent {
	var ev events.SQSEvent
	fixture(t, "sqs-fifo-event.json", &ev)
	return ev
}

// short names a fixture message by its message ID's first part ("b1").
func short(id string) string { s, _, _ := strings.Cut(id, "-"); return s }

// TestSQSFIFOGroupFailsAlone checks that a failure in one message group
// fails that group's later messages only, unprocessed, while the other
// groups are processed in their order; and that the redelivery finishes
// the failed group in order without running the others again.
func TestSQSFIFOGroupFailsAlone(t *testing.T) {
	ctx := context.Background()
	g := dedupe.New(memstore.New(), &dedupe.Config{Prefix: "orders"})
	var ran []string
	failB1 := true
	var skipped []string
	cfg := &dedupe.SQSConfig{OnItem: func(o dedupe.ItemOutcome) {
		if o.Status == dedupe.ItemSkipped {
			skipped = append(skipped, short(o.ID))
		}
	}}
	fn := func(_ context.Context, m events.SQSMessage) error {
		if short(m.MessageId) == "b1" && failB1 {
			return errors.New("downstream refused b1")
		}
		ran = append(ran, short(m.MessageId))
		return nil
	}
	ev := fifoFixture(t)
	var got []string
	for _, id := range failedIDs(dedupe.SQS(g, cfg, fn)(ctx, ev)) {
		got = append(got, short(id))
	}
	if want := []string{"b1", "b2", "b3"}; !slices.Equal(got, want) {
		t.Errorf("failed %v, want %v: only group B fails", got, want)
	}
	if want := []string{"a1", "a2", "c1", "a3"}; !slices.Equal(ran, want) {
		t.Errorf("ran %v, want %v: the other groups go on, in order", ran, want)
	}
	if want := []string{"b2", "b3"}; !slices.Equal(skipped, want) {
		t.Errorf("skipped %v, want %v", skipped, want)
	}

	// SQS delivers group B again; the whole batch, too, to show that
	// nothing done runs twice.
	failB1, ran, skipped = false, nil, nil
	if f := failedIDs(dedupe.SQS(g, cfg, fn)(ctx, ev)); len(f) != 0 {
		t.Errorf("redelivery failed %v, want none", f)
	}
	if want := []string{"b1", "b2", "b3"}; !slices.Equal(ran, want) {
		t.Errorf("redelivery ran %v, want %v: group B in order, the rest are duplicates", ran, want)
	}
}

// TestSQSFIFOWithoutGroup checks that a FIFO message whose group is
// unknown keeps the old, stricter order: a failure fails every later
// message.
func TestSQSFIFOWithoutGroup(t *testing.T) {
	ev := fifoFixture(t)
	for i := range ev.Records {
		delete(ev.Records[i].Attributes, "MessageGroupId")
	}
	g := dedupe.New(memstore.New(), &dedupe.Config{Prefix: "orders"})
	var got []string
	for _, id := range failedIDs(dedupe.SQS(g, nil, func(_ context.Context, m events.SQSMessage) error {
		if short(m.MessageId) == "b1" {
			return errors.New("refused")
		}
		return nil
	})(context.Background(), ev)) {
		got = append(got, short(id))
	}
	if want := []string{"b1", "a2", "b2", "c1", "b3", "a3"}; !slices.Equal(got, want) {
		t.Errorf("failed %v, want %v", got, want)
	}
}

// TestSQSDeduplicationID checks the FIFO deduplication ID as a key: a
// producer's re-send (new message ID, same deduplication ID) is a
// duplicate; the same ID in another group is another message; a message
// with no ID (a standard queue) fails rather than sharing a key.
func TestSQSDeduplicationID(t *testing.T) {
	ctx := context.Background()
	g := dedupe.New(memstore.New(), &dedupe.Config{Prefix: "orders"})
	cfg := &dedupe.SQSConfig{Key: dedupe.SQSDeduplicationID}
	runs := map[string]int{}
	fn := func(_ context.Context, m events.SQSMessage) error { runs[m.MessageId]++; return nil }
	ev := fifoFixture(t)
	if f := failedIDs(dedupe.SQS(g, cfg, fn)(ctx, ev)); len(f) != 0 {
		t.Fatalf("first delivery failed %v", f)
	}
	resend := ev.Records[0]
	resend.MessageId = "resent-after-6-minutes"
	otherGroup := ev.Records[0]
	otherGroup.MessageId = "same-id-other-group"
	otherGroup.Attributes = map[string]string{"MessageGroupId": "customer-Z", "MessageDeduplicationId": ev.Records[0].Attributes["MessageDeduplicationId"]}
	standard := sqsFixture(t).Records[0]
	batch := events.SQSEvent{Records: []events.SQSMessage{resend, otherGroup}}
	if f := failedIDs(dedupe.SQS(g, cfg, fn)(ctx, batch)); len(f) != 0 {
		t.Errorf("failed %v, want none", f)
	}
	if runs["resent-after-6-minutes"] != 0 || runs["same-id-other-group"] != 1 {
		t.Errorf("runs %v: want the re-send a duplicate, the other group's message run", runs)
	}
	if f := failedIDs(dedupe.SQS(g, cfg, fn)(ctx, events.SQSEvent{Records: []events.SQSMessage{standard}})); !slices.Equal(f, []string{standard.MessageId}) || runs[standard.MessageId] != 0 {
		t.Errorf("standard-queue message: failed %v, runs %d; want it failed, not run", f, runs[standard.MessageId])
	}
}

// TestSQSFIFOGroupsRandomized checks the FIFO rule on random batches of
// interleaved groups with random failures: a message runs exactly when
// no earlier message of its group failed, in batch order, and every
// message that did not succeed is reported for redelivery.
func TestSQSFIFOGroupsRandomized(t *testing.T) {
	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	t.Logf("seed %d", seed)
	for round := range 200 {
		n := 1 + rng.IntN(10)
		groups := 1 + rng.IntN(4)
		ev := events.SQSEvent{}
		fails := map[string]bool{}
		for i := range n {
			id := fmt.Sprintf("m%d", i)
			ev.Records = append(ev.Records, events.SQSMessage{MessageId: id, Body: id,
				EventSourceARN: "arn:aws:sqs:us-east-1:123456789012:q.fifo",
				Attributes:     map[string]string{"MessageGroupId": fmt.Sprint("g", rng.IntN(groups))}})
			fails[id] = rng.IntN(4) == 0
		}
		g := dedupe.New(memstore.New(), &dedupe.Config{Prefix: "rand"})
		var ran []string
		failed := failedIDs(dedupe.SQS(g, nil, func(_ context.Context, m events.SQSMessage) error {
			ran = append(ran, m.MessageId)
			if fails[m.MessageId] {
				return errors.New("fail")
			}
			return nil
		})(context.Background(), ev))
		var wantRan, wantFailed []string
		broken := map[string]bool{}
		for _, m := range ev.Records {
			grp := m.Attributes["MessageGroupId"]
			if broken[grp] {
				wantFailed = append(wantFailed, m.MessageId)
				continue
			}
			wantRan = append(wantRan, m.MessageId)
			if fails[m.MessageId] {
				broken[grp] = true
				wantFailed = append(wantFailed, m.MessageId)
			}
		}
		if !slices.Equal(ran, wantRan) || !slices.Equal(failed, wantFailed) {
			t.Fatalf("seed %d round %d: ran %v, failed %v; want ran %v, failed %v", seed, round, ran, failed, wantRan, wantFailed)
		}
	}
}
