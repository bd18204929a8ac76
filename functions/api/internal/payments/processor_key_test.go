package payments_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/lambda-dedupe/dedupe/functions/api/internal/payments"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/memstore"
)

// lossyStore loses every completion: the handler ran, its result cannot
// be recorded (the window no idempotency store can close).
type lossyStore struct{ dedupe.Store }

func (lossyStore) Complete(context.Context, dedupe.CompleteRequest) error {
	return fmt.Errorf("simulated timeout: %w", dedupe.ErrStoreUnavailable)
}

func TestSimulatedProcessorIdempotencyKey(t *testing.T) {
	p := &payments.SimulatedProcessor{}
	ctx := context.Background()
	for range 2 {
		if st, err := p.Charge(ctx, 100, "EUR", payments.TokVisa, "k-1"); err != nil || st != payments.StatusSucceeded {
			t.Fatalf("Charge = %q, %v; want succeeded", st, err)
		}
	}
	if _, err := p.Charge(ctx, 100, "EUR", payments.TokProcessorError, "k-2"); err == nil {
		t.Fatal("want the processor error")
	}
	p.Charge(ctx, 100, "EUR", payments.TokVisa, "k-2") // a failure is not remembered
	p.Charge(ctx, 100, "EUR", payments.TokVisa, "")
	if got := p.Charged(); got != 3 {
		t.Errorf("Charged = %d, want 3: k-1 once, k-2 after its failure, one without a key", got)
	}
}

// The retry after an unrecorded charge runs the handler again, but the
// processor gets the same idempotency key and charges once.
func TestProcessorKeyClosesTheUnrecordedWindow(t *testing.T) {
	clock := &testClock{now: time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)}
	sim := &payments.SimulatedProcessor{}
	proc := &countingProcessor{Processor: sim}
	api, err := payments.New(payments.Config{Repository: newMemoryRepo(), Processor: proc, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	h := api.Handler(dedupe.New(lossyStore{memstore.New()}, &dedupe.Config{Prefix: "api-test", Now: clock.Now}))
	req := create(t, "key-unrecorded", charge(1250, payments.TokVisa))
	for i := range 2 {
		resp, err := h(context.Background(), req)
		if err != nil || resp.StatusCode != http.StatusCreated {
			t.Fatalf("attempt %d = %d, %v; want 201", i+1, resp.StatusCode, err)
		}
		clock.Advance(dedupe.DefaultLease + time.Second) // the lease of the lost record runs out
	}
	if n := proc.charges.Load(); n != 2 {
		t.Errorf("handler reached the processor %d times, want 2 (the record was lost)", n)
	}
	if len(proc.keys) != 2 || proc.keys[0] == "" || proc.keys[0] != proc.keys[1] {
		t.Errorf("processor keys = %q, want the same non-empty key twice", proc.keys)
	}
	if got := sim.Charged(); got != 1 {
		t.Errorf("card charged %d times, want 1", got)
	}
}
