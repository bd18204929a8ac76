package payments_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lambda-dedupe/dedupe/functions/api/internal/payments"
)

func TestSimulatedProcessor(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	hang := make(chan struct{})
	close(hang)
	tests := []struct {
		name   string
		p      *payments.SimulatedProcessor
		ctx    context.Context
		source string
		want   payments.Status
		err    error
	}{
		{"visa succeeds", &payments.SimulatedProcessor{}, context.Background(), payments.TokVisa, payments.StatusSucceeded, nil},
		{"declined", &payments.SimulatedProcessor{}, context.Background(), payments.TokChargeDeclined, payments.StatusDeclined, nil},
		{"processor error", &payments.SimulatedProcessor{}, context.Background(), payments.TokProcessorError, "", payments.ErrProcessor},
		{"unknown token", &payments.SimulatedProcessor{}, context.Background(), "tok_nope", "", payments.ErrInvalidSource},
		{"slow succeeds", &payments.SimulatedProcessor{SlowLatency: time.Nanosecond}, context.Background(), payments.TokSlow, payments.StatusSucceeded, nil},
		{"slow honours cancellation", &payments.SimulatedProcessor{}, cancelled, payments.TokSlow, "", context.Canceled},
		{"timeout ignores cancellation until Hang closes", &payments.SimulatedProcessor{Hang: hang}, cancelled, payments.TokTimeout, "", payments.ErrProcessor},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.p.Charge(tt.ctx, 100, "EUR", tt.source, "")
			if got != tt.want || !errors.Is(err, tt.err) || (tt.err == nil) != (err == nil) {
				t.Errorf("Charge(%s) = %q, %v; want %q, %v", tt.source, got, err, tt.want, tt.err)
			}
		})
	}
	t.Run("panic", func(t *testing.T) {
		defer func() {
			if recover() == nil {
				t.Error("tok_panic did not panic")
			}
		}()
		(&payments.SimulatedProcessor{}).Charge(context.Background(), 100, "EUR", payments.TokPanic, "")
	})
}
