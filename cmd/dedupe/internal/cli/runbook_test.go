package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/memstore"
)

// runbook is the page whose queries TestRunbookQueries checks.
const runbook = "../../../../docs/operating.md"

// failingStore fails every claim as a throttled store would.
type failingStore struct{ dedupe.Store }

func (failingStore) Claim(context.Context, dedupe.ClaimRequest) (dedupe.ClaimResult, error) {
	return dedupe.ClaimResult{}, fmt.Errorf("throttled: %w", dedupe.ErrStoreUnavailable)
}

// realEvents logs the one event of requests with every outcome the
// runbook's queries filter on, through the HTTP API adapter and slog's
// JSON handler as the functions log it, and returns them.
func realEvents(t *testing.T) []map[string]any {
	t.Helper()
	raw, err := os.ReadFile("testdata/order-42.json")
	if err != nil {
		t.Fatal(err)
	}
	var req events.APIGatewayV2HTTPRequest
	if err := json.Unmarshal(raw, &req); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&log, nil))
	ctx := func(id string) context.Context {
		return lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: id})
	}
	ok := func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		return events.APIGatewayV2HTTPResponse{StatusCode: 201, Body: "{}"}, nil
	}

	g := dedupe.New(memstore.New(), &dedupe.Config{Prefix: prefix, Logger: logger, Cache: dedupe.NewCache(0, 0)})
	var h func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error)
	first := true
	h = dedupe.HTTPAPI(g, nil, func(c context.Context, r events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		if first {
			first = false
			h(ctx("req-conflict"), r) // in_progress
		}
		return ok(c, r)
	})
	h(ctx("req-first"), req)  // executed
	h(ctx("req-replay"), req) // replayed (cached)
	other := req
	other.Body = `{"orderId":"order-42","amount":1}`
	h(ctx("req-mismatch"), other) // mismatch

	down := dedupe.HTTPAPI(dedupe.New(failingStore{memstore.New()}, &dedupe.Config{Prefix: prefix, Logger: logger}), nil, ok)
	down(ctx("req-down"), req) // store_error

	evs := loggedEvents(t, &log)
	var outcomes []string
	for _, e := range evs {
		outcomes = append(outcomes, e["outcome"].(string))
	}
	for _, want := range []string{dedupe.OutcomeExecuted, dedupe.OutcomeReplayed, dedupe.OutcomeInProgress, dedupe.OutcomeMismatch, dedupe.OutcomeStoreError} {
		if !slices.Contains(outcomes, want) {
			t.Fatalf("no %s event among %v", want, outcomes)
		}
	}
	return evs
}

// insightsWords are the Logs Insights commands, keywords and functions
// the runbook's queries use; every other word must be a field.
var insightsWords = map[string]bool{
	"fields": true, "filter": true, "stats": true, "sort": true, "limit": true, "display": true,
	"by": true, "as": true, "and": true, "or": true, "not": true, "asc": true, "desc": true,
	"count": true, "sum": true, "avg": true, "min": true, "max": true, "pct": true, "bin": true,
	"ispresent": true, "like": true, "in": true,
}

// TestRunbookQueries parses every Logs Insights query in the runbook and
// checks each field it uses against events the guard really logs, and
// each outcome it filters on against the Outcome constants, so that a
// renamed field breaks this test rather than an operator's query.
func TestRunbookQueries(t *testing.T) {
	page, err := os.ReadFile(runbook)
	if err != nil {
		t.Fatal(err)
	}
	fields := map[string]bool{}
	for _, e := range realEvents(t) {
		for k := range e {
			fields[k] = true
		}
	}
	outcomes := map[string]bool{}
	for _, o := range []string{dedupe.OutcomeExecuted, dedupe.OutcomeReplayed, dedupe.OutcomeWaited, dedupe.OutcomeInProgress,
		dedupe.OutcomeMismatch, dedupe.OutcomeMissingKey, dedupe.OutcomeInvalidKey, dedupe.OutcomeInvalidRequest,
		dedupe.OutcomeStoreError, dedupe.OutcomeReleased, dedupe.OutcomeLeaseLost, dedupe.OutcomeNotStored,
		dedupe.OutcomeTooLarge, dedupe.OutcomeHeld} {
		outcomes[o] = true
	}

	blocks := regexp.MustCompile("(?s)```text\n(.*?)```").FindAllStringSubmatch(string(page), -1)
	queries := 0
	strLit := regexp.MustCompile(`"[^"]*"`)
	word := regexp.MustCompile(`@?[A-Za-z_][A-Za-z0-9_]*`)
	for _, b := range blocks {
		q := b[1]
		first := strings.Fields(q)
		if len(first) == 0 || !slices.Contains([]string{"fields", "filter", "stats"}, first[0]) {
			continue
		}
		queries++
		for _, m := range regexp.MustCompile(`outcome = "([^"]*)"`).FindAllStringSubmatch(q, -1) {
			if !outcomes[m[1]] {
				t.Errorf("query filters on outcome %q, which the guard never logs:\n%s", m[1], q)
			}
		}
		for _, m := range regexp.MustCompile(`msg = "([^"]*)"`).FindAllStringSubmatch(q, -1) {
			if m[1] != "dedupe: request" {
				t.Errorf("query filters on message %q:\n%s", m[1], q)
			}
		}
		code := strLit.ReplaceAllString(q, `""`)
		code = regexp.MustCompile(`\b\d+[a-z]*\b`).ReplaceAllString(code, "")
		words := word.FindAllString(code, -1)
		for i, w := range words {
			switch {
			case strings.HasPrefix(w, "@"), insightsWords[w]:
			case i > 0 && words[i-1] == "as":
				fields[w] = true // an alias the query defines
			case !fields[w]:
				t.Errorf("query uses field %q, which no logged event has (fields: %v):\n%s", w, keys(fields), q)
			}
		}
	}
	if queries < 5 {
		t.Errorf("found %d queries in %s, want the runbook's (at least 5)", queries, runbook)
	}
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestRunbookEventFields checks the event the runbook shows: a 409 names
// the owner in flight, a replay names the execution it replays.
func TestRunbookEventFields(t *testing.T) {
	for _, e := range realEvents(t) {
		switch e["outcome"] {
		case dedupe.OutcomeInProgress:
			if e["original_request_id"] != "req-first" || e["request_id"] != "req-conflict" || e["status"] != 409.0 {
				t.Errorf("409 event = %v", e)
			}
		case dedupe.OutcomeReplayed:
			if e["original_request_id"] != "req-first" || e["cached"] != true {
				t.Errorf("replay event = %v", e)
			}
		case dedupe.OutcomeExecuted:
			if _, ok := e["original_request_id"]; ok {
				t.Errorf("execution event names an original: %v", e)
			}
		}
		if _, err := time.Parse(time.RFC3339Nano, e["time"].(string)); err != nil {
			t.Errorf("event time: %v", err)
		}
	}
}
