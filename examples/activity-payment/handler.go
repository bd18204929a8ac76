package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
)

// Input is the activity's input, from the state machine: the execution
// and step identify the attempt, whatever Step Functions retries.
type Input struct {
	ExecutionID string `json:"executionId"`
	Step        string `json:"step"`
	OrderID     string `json:"orderId"`
	Amount      int64  `json:"amount"`
}

// Output is the activity's result.
type Output struct {
	ChargeID string `json:"chargeId"`
	Replayed bool   `json:"replayed"`
}

// Processor captures payments and deduplicates on an idempotency key of
// its own, as real processors do.
type Processor interface {
	Capture(ctx context.Context, idempotencyKey, orderID string, amount int64) (chargeID string, err error)
}

// Handler captures one payment per workflow step.
//
// The guard makes a retried step answer with the first capture's charge.
// But one window stays open to any idempotency table: the capture went
// through and its record could not be written (a throttled table, the
// invocation timed out right after). Once the lease runs out, the retry
// runs the activity again. The claim's DownstreamKey closes it: the same
// for every retry of this step, it makes the processor answer the second
// capture with the first charge.
type Handler struct {
	Guard     *dedupe.Guard
	Processor Processor
}

// Handle runs the activity. An error fails the task, and the state
// machine's Retry decides what happens next.
func (h *Handler) Handle(ctx context.Context, in Input) (Output, error) {
	if in.ExecutionID == "" || in.Step == "" {
		return Output{}, errors.New("activity-payment: executionId and step are required")
	}
	payload, err := json.Marshal(struct {
		OrderID string `json:"orderId"`
		Amount  int64  `json:"amount"`
	}{in.OrderID, in.Amount})
	if err != nil {
		return Output{}, fmt.Errorf("activity-payment: %w", err)
	}
	a, err := dedupe.Once(ctx, h.Guard, in.ExecutionID+"/"+in.Step, payload, func(ctx context.Context) (string, error) {
		claim, _ := dedupe.ClaimFrom(ctx)
		return h.Processor.Capture(ctx, claim.DownstreamKey(), in.OrderID, in.Amount)
	})
	if err != nil {
		return Output{}, fmt.Errorf("activity-payment: %w", err)
	}
	// a.Warning (not recorded) needs no action here: the processor's key
	// makes the next attempt safe.
	return Output{ChargeID: a.Value, Replayed: a.Replayed}, nil
}

// FakeProcessor is an in-memory Processor for the example and its tests.
type FakeProcessor struct {
	mu       sync.Mutex
	charges  map[string]string
	Captured int // captures that charged, replays not counted
}

// NewFakeProcessor returns an empty FakeProcessor.
func NewFakeProcessor() *FakeProcessor { return &FakeProcessor{charges: map[string]string{}} }

// Capture implements Processor.
func (p *FakeProcessor) Capture(_ context.Context, key, orderID string, amount int64) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if id, ok := p.charges[key]; ok {
		return id, nil
	}
	p.Captured++
	id := fmt.Sprintf("ch_%d_%s_%d", p.Captured, orderID, amount)
	p.charges[key] = id
	return id, nil
}
