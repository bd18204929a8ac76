package proc

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestWaitDynamoDBErrors checks that each way a wait can end says what
// happened: the caller's context ending is wrapped, not blamed on the
// server, and the wait's own limit is not reported as the caller's.
func TestWaitDynamoDBErrors(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "not ready", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	exited := make(chan struct{})
	close(exited)

	tests := []struct {
		name       string
		ctx        context.Context
		timeout    time.Duration
		done       chan struct{}
		wantIs     error
		wantSubstr string
	}{
		{name: "caller gave up", ctx: cancelled, timeout: time.Hour, done: make(chan struct{}),
			wantIs: context.Canceled, wantSubstr: "caller gave up"},
		{name: "own limit", ctx: context.Background(), timeout: 50 * time.Millisecond, done: make(chan struct{}),
			wantSubstr: "not answering after 50ms"},
		{name: "process exited", ctx: context.Background(), timeout: time.Hour, done: exited,
			wantSubstr: "process exited"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := WaitDynamoDB(tt.ctx, srv.URL, tt.timeout, tt.done)
			if err == nil {
				t.Fatal("got nil, want an error")
			}
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Errorf("got %v, want it to wrap %v", err, tt.wantIs)
			}
			if tt.wantIs == nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
				t.Errorf("got %v, want no context error wrapped: the caller did not give up", err)
			}
			if !strings.Contains(err.Error(), tt.wantSubstr) {
				t.Errorf("got %q, want it to contain %q", err, tt.wantSubstr)
			}
		})
	}
}
