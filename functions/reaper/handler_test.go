package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/lambda-dedupe/dedupe/localtest/dynamotest"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/dynamostore"
)

// TestHandle runs the handler against the test endpoint on a table created
// from template.yaml: it clears the stranded records, emits one EMF line
// and returns the report.
func TestHandle(t *testing.T) {
	ctx := context.Background()
	client := dynamotest.Client(t)
	table := dynamotest.CreateTables(t, client, "IdempotencyTable")["IdempotencyTable"]

	s, err := loadSettings(func(k string) string {
		return map[string]string{"IDEMPOTENCY_TABLE": table, "REAPER_GRACE": "30s"}[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	store, err := dynamostore.New(client, dynamostore.Options{Table: s.Table, Shards: s.Shards})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2031, 1, 2, 3, 4, 5, 0, time.UTC)
	for i := range 3 {
		at := now.Add(-time.Duration(i+2) * time.Minute)
		if _, err := store.Claim(ctx, dedupe.ClaimRequest{Key: fmt.Sprint("stranded-", i), Token: fmt.Sprint("tok-", i),
			Now: at, LeaseUntil: at.Add(time.Minute), ExpiresAt: at.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := store.Claim(ctx, dedupe.ClaimRequest{Key: "live", Token: "tok-live",
		Now: now, LeaseUntil: now.Add(time.Minute), ExpiresAt: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}

	var logs, metrics bytes.Buffer
	h := newHandler(store, s, slog.New(slog.NewJSONHandler(&logs, nil)), &metrics, "ReaperFunction")
	h.opts.Now = func() time.Time { return now }
	h.now = h.opts.Now
	report, err := h.Handle(ctx, json.RawMessage(`{"source":"aws.events","detail-type":"Scheduled Event"}`))
	if err != nil {
		t.Fatal(err)
	}
	if report.Found != 3 || report.Cleared != 3 || report.Truncated {
		t.Errorf("got %+v, want 3 found and cleared", report)
	}
	var line map[string]any
	if err := json.Unmarshal(metrics.Bytes(), &line); err != nil {
		t.Fatalf("metrics %q: %v", metrics.String(), err)
	}
	if line["StrandedCleared"] != 3.0 || line["FunctionName"] != "ReaperFunction" {
		t.Errorf("metrics line %v, want StrandedCleared 3 for ReaperFunction", line)
	}
	if got := strings.Count(logs.String(), "cleared stranded record"); got != 3 {
		t.Errorf("got %d cleared-record log lines, want 3:\n%s", got, logs.String())
	}
	if _, err := store.Get(ctx, "live", now); err != nil {
		t.Errorf("live record: %v, want it kept", err)
	}
	out, err := json.Marshal(report)
	if err != nil || !strings.Contains(string(out), `"cleared":3`) {
		t.Errorf("result JSON %s, %v; want the counts", out, err)
	}
}

// TestHandleError fails the invocation when the reap fails, after writing
// the metrics.
func TestHandleError(t *testing.T) {
	var metrics bytes.Buffer
	h := newHandler(failingStore{}, settings{}, slog.New(slog.DiscardHandler), &metrics, "")
	report, err := h.Handle(context.Background(), nil)
	if !errors.Is(err, dedupe.ErrStoreUnavailable) {
		t.Errorf("got %v, want ErrStoreUnavailable", err)
	}
	if report.Errors != 8 {
		t.Errorf("got %+v, want the report with the errors", report)
	}
	if !strings.Contains(metrics.String(), `"ReapErrors":8`) || !strings.Contains(metrics.String(), localFunctionName) {
		t.Errorf("metrics %q, want ReapErrors 8 under %s", metrics.String(), localFunctionName)
	}
}

// failingStore fails every reap, as a throttled table would.
type failingStore struct{}

func (failingStore) Reap(context.Context, dynamostore.ReapOptions) (dynamostore.ReapReport, error) {
	return dynamostore.ReapReport{Errors: 8, Truncated: true}, fmt.Errorf("query: %w", dedupe.ErrStoreUnavailable)
}
