package dedupe_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/memstore"
)

// lines decodes JSON lines.
func lines(t *testing.T, b *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(b.Bytes()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}

// TestEveryOutcomeLogsOneEvent checks issue 11's observability: each
// guarded request produces exactly one log event and one EMF line, with
// its outcome, the key's KeyRef (never the key), the request ID, the
// route, and the latencies; and the outcome hook sees the same event.
func TestEveryOutcomeLogsOneEvent(t *testing.T) {
	type step struct {
		key, body, source string
		require           bool
	}
	tests := []struct {
		name    string
		faults  func(*faultyStore)
		cfg     dedupe.Config
		steps   []step // all but the last set the scene
		outcome string
		status  int
	}{
		{"executed", nil, dedupe.Config{}, []step{{key: "k"}}, dedupe.OutcomeExecuted, 201},
		{"replayed", nil, dedupe.Config{}, []step{{key: "k"}, {key: "k"}}, dedupe.OutcomeReplayed, 201},
		{"mismatch", nil, dedupe.Config{}, []step{{key: "k"}, {key: "k", body: `{"amount":2}`}}, dedupe.OutcomeMismatch, 422},
		{"missing key", nil, dedupe.Config{}, []step{{require: true}}, dedupe.OutcomeMissingKey, 400},
		{"invalid key", nil, dedupe.Config{}, []step{{key: "a,b"}}, dedupe.OutcomeInvalidKey, 400},
		{"store error", func(f *faultyStore) { f.claimErr = errStoreDown }, dedupe.Config{}, []step{{key: "k"}}, dedupe.OutcomeStoreError, 503},
		{"released (5xx)", nil, dedupe.Config{}, []step{{key: "k", source: "5xx"}}, dedupe.OutcomeReleased, 502},
		{"not stored", func(f *faultyStore) { f.completeErr = errStoreDown }, dedupe.Config{}, []step{{key: "k"}}, dedupe.OutcomeNotStored, 201},
		{"lease lost", func(f *faultyStore) { f.completeErr = fmt.Errorf("faulty: %w", dedupe.ErrLeaseLost) }, dedupe.Config{}, []step{{key: "k"}}, dedupe.OutcomeLeaseLost, 201},
		{"too large", func(f *faultyStore) { f.omitOver = 5 }, dedupe.Config{}, []step{{key: "k"}}, dedupe.OutcomeTooLarge, 201},
		{"in progress", func(f *faultyStore) { f.completeErr = errStoreDown }, dedupe.Config{}, []step{{key: "k"}, {key: "k"}}, dedupe.OutcomeInProgress, 409},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs, emf bytes.Buffer
			var hooked []dedupe.Event
			cfg := tt.cfg
			cfg.Logger = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			cfg.Metrics = &dedupe.EMF{W: &emf, FunctionName: "payments-api"}
			cfg.OnOutcome = func(_ context.Context, ev dedupe.Event) { hooked = append(hooked, ev) }
			cfg.Prefix = "fn"
			fs := &faultyStore{Store: memstore.New()}
			if tt.faults != nil {
				tt.faults(fs)
			}
			g := dedupe.New(fs, &cfg)
			h := dedupe.HTTPAPI(g, &dedupe.HTTPConfig{RequireKey: func(string) bool { return true }},
				func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
					return events.APIGatewayV2HTTPResponse{StatusCode: 201, Body: `{"id":"pay_1"}`}, nil
				})
			var last events.APIGatewayV2HTTPResponse
			for i, s := range tt.steps {
				if i == len(tt.steps)-1 {
					logs.Reset()
					emf.Reset()
					hooked = nil
				}
				var ev events.APIGatewayV2HTTPRequest
				fixture(t, "apigw-v2-jwt.json", &ev)
				delete(ev.Headers, "idempotency-key")
				if s.key != "" {
					ev.Headers["idempotency-key"] = s.key
				}
				if s.body != "" {
					ev.Body = s.body
				}
				if s.source == "5xx" {
					h2 := dedupe.HTTPAPI(g, nil, func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
						return events.APIGatewayV2HTTPResponse{StatusCode: 502}, nil
					})
					last, _ = h2(lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "req-1"}), ev)
					continue
				}
				ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "req-1"})
				last, _ = h(ctx, ev)
			}
			if last.StatusCode != tt.status {
				t.Errorf("status = %d, want %d", last.StatusCode, tt.status)
			}
			got := lines(t, &logs)
			if len(got) != 1 {
				t.Fatalf("got %d log lines, want 1: %v", len(got), got)
			}
			l := got[0]
			if l["msg"] != "dedupe: request" || l["outcome"] != tt.outcome || l["request_id"] != "req-1" || l["route"] != "POST /payments" || l["status"] != float64(tt.status) {
				t.Errorf("log = %v, want outcome %s, request_id req-1, route, status %d", l, tt.outcome, tt.status)
			}
			if _, ok := l["store_ms"]; !ok {
				t.Errorf("log %v has no store_ms", l)
			}
			if tt.outcome != dedupe.OutcomeMissingKey && tt.outcome != dedupe.OutcomeInvalidKey && !strings.HasPrefix(fmt.Sprint(l["key"]), "key:") {
				t.Errorf("log key = %v, want a KeyRef", l["key"])
			}
			if raw := logs.String(); strings.Contains(raw, "amount") {
				t.Errorf("log holds the body: %s", raw)
			}
			m := lines(t, &emf)
			if len(m) != 1 || m[0][tt.outcome] != float64(1) || m[0]["FunctionName"] != "payments-api" || m[0]["Route"] != "POST /payments" {
				t.Fatalf("EMF = %v, want one line counting %s by function and route", m, tt.outcome)
			}
			aws := m[0]["_aws"].(map[string]any)
			dir := aws["CloudWatchMetrics"].([]any)[0].(map[string]any)
			if dir["Namespace"] != "Dedupe" || fmt.Sprint(dir["Dimensions"]) != "[[FunctionName Route]]" {
				t.Errorf("EMF directive = %v", dir)
			}
			if len(hooked) != 1 || hooked[0].Outcome != tt.outcome {
				t.Errorf("OnOutcome saw %+v, want one %s event", hooked, tt.outcome)
			}
		})
	}
}

// TestRawKeysOnlyWhenAsked checks that the event names a key by KeyRef
// unless Config.LogKeys is set.
func TestRawKeysOnlyWhenAsked(t *testing.T) {
	for _, logKeys := range []bool{false, true} {
		var logs bytes.Buffer
		g := dedupe.New(memstore.New(), &dedupe.Config{Prefix: "fn", LogKeys: logKeys, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
		g.Do(context.Background(), dedupe.Call{Key: "alice@example.com", Fingerprint: "fp"}, func(context.Context) (dedupe.Result, error) { return dedupe.Result{}, nil })
		if got := strings.Contains(logs.String(), "alice@example.com"); got != logKeys {
			t.Errorf("LogKeys %v: key in log = %v (%s)", logKeys, got, logs.String())
		}
	}
}

// TestPanicStillLogsOneEvent checks that a panicking function's request
// is logged (released) before the panic goes on.
func TestPanicStillLogsOneEvent(t *testing.T) {
	var logs bytes.Buffer
	g := dedupe.New(memstore.New(), &dedupe.Config{Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	func() {
		defer func() { recover() }()
		g.Do(context.Background(), dedupe.Call{Key: "k", Fingerprint: "fp"}, func(context.Context) (dedupe.Result, error) { panic("boom") })
	}()
	got := lines(t, &logs)
	if len(got) != 1 || got[0]["outcome"] != dedupe.OutcomeReleased {
		t.Errorf("log = %v, want one released event", got)
	}
}

// TestCache checks the warm-container cache: a replay it has seen costs
// no store call, a different request is still refused from it, expired
// entries are dropped, and in-flight records are never cached.
func TestCache(t *testing.T) {
	clk := newClock()
	cs := &countingStore{Store: memstore.New()}
	cache := dedupe.NewCache(0, 0)
	g := dedupe.New(cs, &dedupe.Config{Now: clk.Now, Cache: cache, Retention: time.Hour})
	runs := 0
	fn := counter(&runs, "paid")
	if _, err := g.Do(context.Background(), dedupe.Call{Key: "k", Fingerprint: "fp"}, fn); err != nil {
		t.Fatal(err)
	}
	before := cs.calls.Load()
	for range 3 {
		out, err := g.Do(context.Background(), dedupe.Call{Key: "k", Fingerprint: "fp"}, fn)
		if err != nil || !out.Replayed || string(out.Result.Body) != "paid" {
			t.Fatalf("cached replay = %+v, %v", out, err)
		}
		out.Result.Body[0] = 'X' // the caller's copy
	}
	if got := cs.calls.Load() - before; got != 0 || runs != 1 {
		t.Errorf("cached replays cost %d store calls after %d runs, want 0 after 1", got, runs)
	}
	if _, err := g.Do(context.Background(), dedupe.Call{Key: "k", Fingerprint: "other"}, fn); !errors.Is(err, dedupe.ErrFingerprintMismatch) {
		t.Errorf("different request: %v, want ErrFingerprintMismatch from the cache", err)
	}
	// In flight: never cached.
	cs.failComplete.Store(true)
	g.Do(context.Background(), dedupe.Call{Key: "k2", Fingerprint: "fp"}, fn)
	cs.failComplete.Store(false)
	if cache.Len() != 1 {
		t.Errorf("cache holds %d records, want 1 (only the completed one)", cache.Len())
	}
	// Expired: gone from the cache, and the key runs again.
	clk.Advance(2 * time.Hour)
	if _, err := g.Do(context.Background(), dedupe.Call{Key: "k", Fingerprint: "fp"}, fn); err != nil || runs != 3 {
		t.Errorf("after expiry: %v, runs %d; want a fresh run", err, runs)
	}
}

// TestCacheBounds checks that the cache keeps within its entries and bytes.
func TestCacheBounds(t *testing.T) {
	cache := dedupe.NewCache(3, 1<<20)
	g := dedupe.New(memstore.New(), &dedupe.Config{Cache: cache})
	for i := range 10 {
		g.Do(context.Background(), dedupe.Call{Key: fmt.Sprint("k", i), Fingerprint: "fp"}, func(context.Context) (dedupe.Result, error) { return dedupe.Result{Body: []byte("x")}, nil })
	}
	if cache.Len() != 3 {
		t.Errorf("cache holds %d, want 3", cache.Len())
	}
	small := dedupe.NewCache(100, 2000)
	g = dedupe.New(memstore.New(), &dedupe.Config{Cache: small})
	for i := range 10 {
		g.Do(context.Background(), dedupe.Call{Key: fmt.Sprint("k", i), Fingerprint: "fp"}, func(context.Context) (dedupe.Result, error) {
			return dedupe.Result{Body: bytes.Repeat([]byte("x"), 500)}, nil
		})
	}
	if n := small.Len(); n == 0 || n > 3 {
		t.Errorf("byte-bounded cache holds %d records of ~600 bytes in 2000, want 1 to 3", n)
	}
}

// TestWaitingDuplicates checks issue 11's waiting: 100 concurrent
// duplicates of a request whose handler takes 50 ms mostly get its replay
// instead of a 409, each with at most 5 extra reads, none past its
// deadline. Pauses come from an injected sleeper that moves a fake clock.
func TestWaitingDuplicates(t *testing.T) {
	const n = 100
	clk := newClock()
	cs := &countingStore{Store: memstore.New()}
	release := make(chan struct{})
	var waiting sync.WaitGroup
	waiting.Add(n)
	started := make(chan struct{})
	owner := make(chan error, 1)
	go func() {
		_, err := dedupe.New(cs, &dedupe.Config{Now: clk.Now}).Do(context.Background(), dedupe.Call{Key: "k", Fingerprint: "fp"}, func(context.Context) (dedupe.Result, error) {
			close(started)
			waiting.Wait() // every duplicate has found the key in flight
			clk.Advance(50 * time.Millisecond)
			return dedupe.Result{StatusCode: 201, Body: []byte("paid")}, nil
		})
		owner <- err
	}()
	<-started
	var wg sync.WaitGroup
	var replays, conflicts atomic.Int32
	gets := make([]int, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var ev dedupe.Event
			first := true
			arrived := func() {
				if first {
					first = false
					waiting.Done()
				}
			}
			// Whatever happens, this duplicate counts as arrived once its
			// call returns, so a failure fails rather than hangs.
			defer arrived()
			dup := dedupe.New(cs, &dedupe.Config{Now: clk.Now, Wait: time.Second,
				Sleep: func(ctx context.Context, d time.Duration) error {
					arrived()
					<-release
					return nil
				},
				OnOutcome: func(_ context.Context, e dedupe.Event) { ev = e }})
			out, err := dup.Do(context.Background(), dedupe.Call{Key: "k", Fingerprint: "fp"}, func(context.Context) (dedupe.Result, error) {
				t.Error("a duplicate ran the function")
				arrived()
				return dedupe.Result{}, nil
			})
			switch {
			case err == nil && out.Replayed && ev.Outcome == dedupe.OutcomeWaited:
				replays.Add(1)
			case errors.Is(err, dedupe.ErrInProgress):
				conflicts.Add(1)
			default:
				t.Errorf("duplicate: %+v, %v (outcome %s)", out, err, ev.Outcome)
			}
			gets[i] = ev.StoreCalls - 1 // the claim is not an extra read
		}()
	}
	if err := <-owner; err != nil {
		t.Fatal(err)
	}
	close(release)
	wg.Wait()
	if replays.Load() < 95 {
		t.Errorf("%d of %d duplicates got the replay (%d got 409), want at least 95", replays.Load(), n, conflicts.Load())
	}
	for i, c := range gets {
		if c > 5 {
			t.Errorf("duplicate %d made %d extra reads, want at most 5", i, c)
		}
	}
}

// TestWaitRespectsDeadline checks that a waiting duplicate never waits
// past its context's deadline less the lease margin.
func TestWaitRespectsDeadline(t *testing.T) {
	clk := newClock()
	store := memstore.New()
	var slept time.Duration
	g := dedupe.New(store, &dedupe.Config{Now: clk.Now, Wait: time.Minute, Sleep: func(ctx context.Context, d time.Duration) error {
		slept += d
		clk.Advance(d)
		return nil
	}})
	store.Claim(context.Background(), dedupe.ClaimRequest{Key: g.Key("k"), Fingerprint: "fp", Token: "other", Now: clk.Now(), LeaseUntil: clk.Now().Add(time.Minute), ExpiresAt: clk.Now().Add(time.Hour)})
	ctx, cancel := context.WithDeadline(context.Background(), clk.Now().Add(2*time.Second+100*time.Millisecond))
	defer cancel()
	_, err := g.Do(ctx, dedupe.Call{Key: "k", Fingerprint: "fp"}, func(context.Context) (dedupe.Result, error) { return dedupe.Result{}, nil })
	if !errors.Is(err, dedupe.ErrInProgress) {
		t.Fatalf("err = %v, want ErrInProgress once the budget is spent", err)
	}
	if slept > 100*time.Millisecond {
		t.Errorf("waited %v, want at most the 100ms left before deadline minus margin", slept)
	}
}

// TestRetryAfterHint checks that a 409's Retry-After is a small hint based
// on how long the request has run and how long such requests take,
// bounded by the lease.
func TestRetryAfterHint(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	c := &dedupe.ConflictError{Err: dedupe.ErrInProgress, Record: dedupe.Record{CreatedAt: now.Add(-time.Second), LeaseExpiresAt: now.Add(30 * time.Second)}}
	for _, tt := range []struct {
		typical time.Duration
		want    time.Duration
	}{
		// Issue 17: unknown, or already outrun (a held or stranded
		// owner), the hint is the lease's end.
		{0, 30 * time.Second},
		{500 * time.Millisecond, 30 * time.Second},
		{4 * time.Second, 3 * time.Second},
		{time.Hour, 30 * time.Second},
	} {
		if got := c.RetryAfterHint(now, tt.typical); got != tt.want {
			t.Errorf("RetryAfterHint(typical %v) = %v, want %v", tt.typical, got, tt.want)
		}
	}
}

// TestOnReplay checks the response hook: it may adjust a replay, and the
// stored record is not changed.
func TestOnReplay(t *testing.T) {
	h := dedupe.HTTPAPI(dedupe.New(memstore.New(), nil), &dedupe.HTTPConfig{OnReplay: func(_ context.Context, r *dedupe.Result) {
		r.Headers["X-Cache"] = []string{"replay"}
	}}, func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		return events.APIGatewayV2HTTPResponse{StatusCode: 201, Body: "ok"}, nil
	})
	var ev events.APIGatewayV2HTTPRequest
	fixture(t, "apigw-v2-jwt.json", &ev)
	first, _ := h(context.Background(), ev)
	replay, _ := h(context.Background(), ev)
	if first.Headers["X-Cache"] != "" || replay.Headers["X-Cache"] != "replay" || replay.Body != "ok" {
		t.Errorf("first %v, replay %v; want the hook's header on the replay only", first.Headers, replay.Headers)
	}
}

// countingStore counts store calls and can fail Complete.
type countingStore struct {
	dedupe.Store
	calls        atomic.Int64
	failComplete atomic.Bool
}

func (c *countingStore) Claim(ctx context.Context, req dedupe.ClaimRequest) (dedupe.ClaimResult, error) {
	c.calls.Add(1)
	return c.Store.Claim(ctx, req)
}

func (c *countingStore) Complete(ctx context.Context, req dedupe.CompleteRequest) error {
	c.calls.Add(1)
	if c.failComplete.Load() {
		return errStoreDown
	}
	return c.Store.Complete(ctx, req)
}

func (c *countingStore) Get(ctx context.Context, key string, now time.Time) (dedupe.Record, error) {
	c.calls.Add(1)
	return c.Store.Get(ctx, key, now)
}
