package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/lambda-dedupe/dedupe/infra"
	"github.com/lambda-dedupe/dedupe/localtest/dynalite"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/dynamostore"
)

// TestHandle runs the handler against the test endpoint on a table created
// from template.yaml: it clears the stranded records, emits one EMF line
// and returns the report.
func TestHandle(t *testing.T) {
	ctx := context.Background()
	client := dynamodb.New(dynamodb.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(dynalite.Endpoint(t)),
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "x", SecretAccessKey: "x"}, nil
		}),
	})
	table := "reaper-" + strings.ToLower(rand.Text()[:12])
	path, err := infra.FindTemplate()
	if err != nil {
		t.Fatal(err)
	}
	tpl, err := infra.LoadWithOptions(path, &infra.Options{Names: map[string]string{"IdempotencyTable": table}})
	if err != nil {
		t.Fatal(err)
	}
	tables, err := infra.Tables(tpl)
	if err != nil {
		t.Fatal(err)
	}
	for _, tb := range tables {
		if tb.LogicalID == "IdempotencyTable" {
			if _, err := infra.EnsureTables(ctx, client, []infra.Table{tb}); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Cleanup(func() { _, _ = client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: &table}) })

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
