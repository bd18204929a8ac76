package payments

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Processor charges cards.
type Processor interface {
	// Charge charges amount (minor units) in currency to source. It
	// returns StatusSucceeded or StatusDeclined when the processor
	// answered; an error wrapping ErrInvalidSource for an unknown source
	// or ErrProcessor when the processor failed (nothing was charged); or
	// the context's error.
	//
	// idempotencyKey, when not empty, is the processor's own idempotency
	// key, as real processors take one: a second charge with the same key
	// is answered with the first one's outcome and charges nothing. The
	// API passes dedupe.Claim.DownstreamKey, which closes the window the
	// idempotency table cannot: the charge went through, but its payment
	// could not be recorded (or the invocation died), and the retry runs
	// the handler again.
	Charge(ctx context.Context, amount int64, currency, source, idempotencyKey string) (Status, error)
}

// The test tokens SimulatedProcessor knows, modelled on a real processor's
// test cards.
const (
	TokVisa           = "tok_visa"
	TokChargeDeclined = "tok_chargeDeclined"
	TokProcessorError = "tok_processorError"
	TokSlow           = "tok_slow"
	TokPanic          = "tok_panic"
	TokTimeout        = "tok_timeout"
)

// DefaultSlowLatency is how long tok_slow takes by default.
const DefaultSlowLatency = 3 * time.Second

// SimulatedProcessor is a card processor for demos and tests: the source
// token decides what happens (see the package documentation). The zero
// value is ready to use and behaves as documented; the fields only let
// tests take time out of the picture.
type SimulatedProcessor struct {
	// SlowLatency is how long tok_slow takes. Zero means
	// DefaultSlowLatency.
	SlowLatency time.Duration

	// Sleep waits for d or until ctx is done, returning ctx's error in
	// that case. Nil means a timer that honours ctx.
	Sleep func(ctx context.Context, d time.Duration) error

	// Hang is what tok_timeout waits for: it ignores its context, like a
	// processor call without a timeout, so the invocation outlives the
	// function's timeout. Nil (the default) never closes: the call never
	// returns and Lambda ends the invocation. Once Hang is closed, the
	// charge fails with ErrProcessor.
	Hang <-chan struct{}

	mu      sync.Mutex
	byKey   map[string]Status // answered charges by idempotency key
	charged int               // charges that went through
}

// Charged returns how many charges succeeded or were declined, replays
// by idempotency key not counted: what a card statement would show.
func (p *SimulatedProcessor) Charged() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.charged
}

// Charge implements Processor. Outcomes with an idempotency key are
// remembered for the life of p (one execution environment: a simulation
// of a processor's own store), and replayed to the same key.
func (p *SimulatedProcessor) Charge(ctx context.Context, amount int64, currency, source, idempotencyKey string) (Status, error) {
	if idempotencyKey != "" {
		p.mu.Lock()
		st, ok := p.byKey[idempotencyKey]
		p.mu.Unlock()
		if ok {
			return st, nil
		}
	}
	st, err := p.charge(ctx, source)
	if err == nil {
		p.mu.Lock()
		p.charged++
		if idempotencyKey != "" {
			if p.byKey == nil {
				p.byKey = make(map[string]Status)
			}
			p.byKey[idempotencyKey] = st
		}
		p.mu.Unlock()
	}
	return st, err
}

// charge decides a charge by its source token.
func (p *SimulatedProcessor) charge(ctx context.Context, source string) (Status, error) {
	switch source {
	case TokVisa:
		return StatusSucceeded, nil
	case TokChargeDeclined:
		return StatusDeclined, nil
	case TokProcessorError:
		return "", fmt.Errorf("charge %s: upstream answered 500: %w", source, ErrProcessor)
	case TokSlow:
		d := p.SlowLatency
		if d <= 0 {
			d = DefaultSlowLatency
		}
		sleep := p.Sleep
		if sleep == nil {
			sleep = sleepCtx
		}
		if err := sleep(ctx, d); err != nil {
			return "", fmt.Errorf("charge %s: %w", source, err)
		}
		return StatusSucceeded, nil
	case TokPanic:
		panic("payments: simulated processor crash (" + TokPanic + ")")
	case TokTimeout:
		<-p.Hang
		return "", fmt.Errorf("charge %s: upstream timed out: %w", source, ErrProcessor)
	}
	return "", fmt.Errorf("charge %q: %w", source, ErrInvalidSource)
}

// sleepCtx waits for d or until ctx is done.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
