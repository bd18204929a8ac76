package payments_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambda-dedupe/dedupe/functions/api/internal/payments"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/memstore"
)

// testClock is a manual, concurrency-safe clock, in the future and on a
// whole second so that a real table's TTL never removes test records.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// countingProcessor counts charges and tells the test when one starts. It
// decorates the real SimulatedProcessor; it changes nothing.
type countingProcessor struct {
	payments.Processor
	charges atomic.Int32
	started chan string // receives each source as its charge starts, if set
	mu      sync.Mutex
	keys    []string // the idempotency keys passed, in order
}

func (p *countingProcessor) Charge(ctx context.Context, amount int64, currency, source, key string) (payments.Status, error) {
	p.charges.Add(1)
	p.mu.Lock()
	p.keys = append(p.keys, key)
	p.mu.Unlock()
	if p.started != nil {
		p.started <- source
	}
	return p.Processor.Charge(ctx, amount, currency, source, key)
}

// backend provides the two stores of a test world.
type backend struct {
	name string
	new  func(t *testing.T) (dedupe.Store, payments.Repository)
}

var memoryBackend = backend{"memory", func(*testing.T) (dedupe.Store, payments.Repository) {
	return memstore.New(), newMemoryRepo()
}}

// env is one test world: an API behind a guard, on one backend.
type env struct {
	t       *testing.T
	clock   *testClock
	repo    payments.Repository
	proc    *countingProcessor
	release chan struct{} // closing it ends every tok_slow wait
	hang    chan struct{} // closing it ends every tok_timeout call
	handler func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error)
}

func newEnv(t *testing.T, b backend) *env {
	store, repo := b.new(t)
	e := &env{
		t:       t,
		clock:   &testClock{now: time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)},
		repo:    repo,
		release: make(chan struct{}),
		hang:    make(chan struct{}),
	}
	t.Cleanup(func() {
		closeOnce(e.release)
		closeOnce(e.hang)
	})
	e.proc = &countingProcessor{Processor: &payments.SimulatedProcessor{
		Sleep: func(ctx context.Context, d time.Duration) error {
			if d != payments.DefaultSlowLatency {
				t.Errorf("tok_slow waits %v, want %v", d, payments.DefaultSlowLatency)
			}
			select {
			case <-e.release:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		},
		Hang: e.hang,
	}}
	api, err := payments.New(payments.Config{Repository: repo, Processor: e.proc, Now: e.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	e.handler = api.Handler(dedupe.New(store, &dedupe.Config{Prefix: "api-test", Now: e.clock.Now}))
	return e
}

func closeOnce(c chan struct{}) {
	select {
	case <-c:
	default:
		close(c)
	}
}

// event loads a testdata event.
func event(t testing.TB, name string) events.APIGatewayV2HTTPRequest {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var ev events.APIGatewayV2HTTPRequest
	if err := json.Unmarshal(b, &ev); err != nil {
		t.Fatal(err)
	}
	return ev
}

// create is a POST /payments with key ("" for none) and body.
func create(t testing.TB, key, body string) events.APIGatewayV2HTTPRequest {
	ev := event(t, "create-payment.json")
	delete(ev.Headers, "idempotency-key")
	if key != "" {
		ev.Headers["idempotency-key"] = key
	}
	ev.Body = body
	return ev
}

func charge(amount int, source string) string {
	return fmt.Sprintf(`{"amount":%d,"currency":"EUR","source":%q}`, amount, source)
}

func get(t testing.TB, id string) events.APIGatewayV2HTTPRequest {
	ev := event(t, "get-payment.json")
	ev.PathParameters = map[string]string{"id": id}
	ev.RawPath = "/payments/" + id
	return ev
}

func list(t testing.TB, query map[string]string) events.APIGatewayV2HTTPRequest {
	ev := event(t, "list-payments.json")
	ev.QueryStringParameters = query
	return ev
}

// as returns ev sent by another IAM user (the testdata events are alice's),
// or with no authorizer at all when user is "".
func as(user string, ev events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPRequest {
	if user == "" {
		ev.RequestContext.Authorizer = nil
		delete(ev.Headers, "authorization")
		return ev
	}
	iam := *ev.RequestContext.Authorizer.IAM
	iam.UserARN = "arn:aws:iam::123456789012:user/" + user
	iam.CallerID, iam.UserID, iam.AccessKey = "AIDA"+strings.ToUpper(user), "AIDA"+strings.ToUpper(user), "AKIA"+strings.ToUpper(user)
	ev.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{IAM: &iam}
	return ev
}

// send invokes the handler, failing the test on an invoke error.
func (e *env) send(req events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse {
	e.t.Helper()
	resp, err := e.handler(context.Background(), req)
	if err != nil {
		e.t.Fatalf("%s: invoke error %v", req.RouteKey, err)
	}
	return resp
}

// sendAsync invokes the handler in a goroutine and returns its answer on
// a channel.
func (e *env) sendAsync(req events.APIGatewayV2HTTPRequest) <-chan events.APIGatewayV2HTTPResponse {
	out := make(chan events.APIGatewayV2HTTPResponse, 1)
	go func() {
		resp, err := e.handler(context.Background(), req)
		if err != nil {
			e.t.Errorf("%s: invoke error %v", req.RouteKey, err)
		}
		out <- resp
	}()
	return out
}

func decode[T any](t testing.TB, resp events.APIGatewayV2HTTPResponse) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(resp.Body), &v); err != nil {
		t.Fatalf("decode %d %q: %v", resp.StatusCode, resp.Body, err)
	}
	return v
}

type problemBody struct {
	Type    string                `json:"type"`
	Title   string                `json:"title"`
	Status  int                   `json:"status"`
	Detail  string                `json:"detail"`
	Errors  []payments.FieldError `json:"errors"`
	Payment *payments.Payment     `json:"payment"`
}

// wantProblem checks that resp is a problem of status and type.
func wantProblem(t testing.TB, resp events.APIGatewayV2HTTPResponse, status int, typ string) problemBody {
	t.Helper()
	p := decode[problemBody](t, resp)
	if resp.StatusCode != status || p.Status != status || p.Type != typ || resp.Headers["Content-Type"] != dedupe.ProblemContentType {
		t.Errorf("got %d %s %q, want a %d %s problem", resp.StatusCode, resp.Headers["Content-Type"], resp.Body, status, typ)
	}
	return p
}

// sameReplay checks that replay is first replayed byte for byte.
func sameReplay(t testing.TB, first, replay events.APIGatewayV2HTTPResponse) {
	t.Helper()
	want := first
	want.Headers = map[string]string{dedupe.HeaderReplayed: "true"}
	for k, v := range first.Headers {
		want.Headers[k] = v
	}
	if !reflect.DeepEqual(replay, want) {
		t.Errorf("replay = %+v, want %+v", replay, want)
	}
}

// allPayments lists every payment through the API, page by page.
func (e *env) allPayments(limit int) []payments.Payment {
	e.t.Helper()
	var all []payments.Payment
	query := map[string]string{"limit": fmt.Sprint(limit)}
	for range 100 {
		resp := e.send(list(e.t, query))
		if resp.StatusCode != 200 {
			e.t.Fatalf("list: got %d %s", resp.StatusCode, resp.Body)
		}
		page := decode[struct {
			Payments []payments.Payment `json:"payments"`
			Next     string             `json:"next"`
		}](e.t, resp)
		all = append(all, page.Payments...)
		if page.Next == "" {
			return all
		}
		query = map[string]string{"limit": fmt.Sprint(limit), "next": page.Next}
	}
	e.t.Fatal("list: more than 100 pages")
	return nil
}

// runSuite runs every behaviour of the API on backend b.
func runSuite(t *testing.T, b backend) {
	tests := []struct {
		name string
		run  func(t *testing.T, e *env)
	}{
		{"charge then replay", testChargeThenReplay},
		{"key is required", testKeyRequired},
		{"declined is stored and replayed", testDeclined},
		{"processor error releases the key", testProcessorError},
		{"slow charge is in flight", testSlow},
		{"panic releases the key", testPanic},
		{"timeout stays in flight until the lease runs out", testTimeout},
		{"invalid requests", testInvalid},
		{"get one payment", testGet},
		{"list is paginated", testList},
		{"unknown route", testUnknownRoute},
		{"concurrent duplicates charge once", testConcurrent},
		{"callers see only their own payments", testOwnPayments},
		{"no caller identity is refused", testNoIdentity},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.run(t, newEnv(t, b)) })
	}
}

func TestAPI(t *testing.T) { runSuite(t, memoryBackend) }

func testChargeThenReplay(t *testing.T, e *env) {
	first := e.send(create(t, `"order-42"`, charge(1250, payments.TokVisa)))
	if first.StatusCode != 201 || first.Headers[dedupe.HeaderReplayed] != "" {
		t.Fatalf("first: got %d %v %s, want a fresh 201", first.StatusCode, first.Headers, first.Body)
	}
	p := decode[payments.Payment](t, first)
	want := payments.Payment{ID: p.ID, Amount: 1250, Currency: "EUR", Source: payments.TokVisa, Status: payments.StatusSucceeded, Created: e.clock.Now()}
	if !strings.HasPrefix(p.ID, "pay_") || len(p.ID) != 30 || !reflect.DeepEqual(p, want) {
		t.Errorf("payment = %+v, want %+v", p, want)
	}
	if loc := first.Headers["Location"]; loc != "/payments/"+p.ID {
		t.Errorf("Location = %q, want /payments/%s", loc, p.ID)
	}
	// A retry with the body re-serialised and the key bare.
	e.clock.Advance(time.Minute)
	replay := e.send(create(t, `order-42`, `{ "source": "tok_visa", "currency": "EUR", "amount": 1250 }`))
	sameReplay(t, first, replay)
	if n := e.proc.charges.Load(); n != 1 {
		t.Errorf("charges = %d, want 1", n)
	}
	if all := e.allPayments(10); len(all) != 1 || !reflect.DeepEqual(all[0], p) {
		t.Errorf("payments = %+v, want just %+v", all, p)
	}
	// Same key, different amount.
	wantProblem(t, e.send(create(t, "order-42", charge(1251, payments.TokVisa))), 422, dedupe.ProblemKeyReused)
}

func testKeyRequired(t *testing.T, e *env) {
	wantProblem(t, e.send(create(t, "", charge(1250, payments.TokVisa))), 400, dedupe.ProblemKeyMissing)
	wantProblem(t, e.send(create(t, strings.Repeat("k", 256), charge(1250, payments.TokVisa))), 400, dedupe.ProblemKeyInvalid)
	if n := e.proc.charges.Load(); n != 0 {
		t.Errorf("charges = %d, want 0", n)
	}
}

func testDeclined(t *testing.T, e *env) {
	first := e.send(create(t, "declined-1", charge(990, payments.TokChargeDeclined)))
	p := wantProblem(t, first, 402, payments.ProblemCardDeclined)
	if p.Payment == nil || p.Payment.Status != payments.StatusDeclined || p.Payment.Amount != 990 {
		t.Fatalf("declined problem carries payment %+v, want the declined payment", p.Payment)
	}
	stored, err := e.repo.Get(context.Background(), p.Payment.ID)
	if err != nil || stored.Status != payments.StatusDeclined {
		t.Errorf("stored payment = %+v, %v; want it declined", stored, err)
	}
	sameReplay(t, first, e.send(create(t, "declined-1", charge(990, payments.TokChargeDeclined))))
	if n := e.proc.charges.Load(); n != 1 {
		t.Errorf("charges = %d, want 1", n)
	}
}

func testProcessorError(t *testing.T, e *env) {
	for i := range 2 {
		r := e.send(create(t, "flaky-1", charge(500, payments.TokProcessorError)))
		wantProblem(t, r, 502, payments.ProblemProcessor)
		if r.Headers[dedupe.HeaderReplayed] != "" {
			t.Errorf("attempt %d was replayed, want a fresh run", i+1)
		}
	}
	if n := e.proc.charges.Load(); n != 2 {
		t.Errorf("charges = %d, want 2 (the 502 released the key)", n)
	}
	if all := e.allPayments(10); len(all) != 0 {
		t.Errorf("payments = %+v, want none", all)
	}
}

func testSlow(t *testing.T, e *env) {
	e.proc.started = make(chan string, 1)
	req := create(t, "slow-1", charge(700, payments.TokSlow))
	pending := e.sendAsync(req)
	<-e.proc.started
	e.proc.started = nil

	e.clock.Advance(10 * time.Second)
	conflict := e.send(req)
	wantProblem(t, conflict, 409, dedupe.ProblemInProgress)
	// Nothing is known yet of how long this route takes: Retry-After is
	// the lease's end (issue 17), never a 1 s guess that a held key
	// would contradict for minutes.
	if ra := conflict.Headers["Retry-After"]; ra != "290" {
		t.Errorf("Retry-After = %q, want 290 (the lease's end)", ra)
	}
	close(e.release)
	first := <-pending
	if first.StatusCode != 201 {
		t.Fatalf("slow charge: got %d %s, want 201", first.StatusCode, first.Body)
	}
	sameReplay(t, first, e.send(req))
	if n := e.proc.charges.Load(); n != 1 {
		t.Errorf("charges = %d, want 1", n)
	}
}

func testPanic(t *testing.T, e *env) {
	req := create(t, "panic-1", charge(300, payments.TokPanic))
	for i := range 2 {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("attempt %d: no panic, want the handler's panic re-raised", i+1)
				}
			}()
			e.handler(context.Background(), req)
		}()
	}
	if n := e.proc.charges.Load(); n != 2 {
		t.Errorf("charges = %d, want 2 (the panic released the key)", n)
	}
	if all := e.allPayments(10); len(all) != 0 {
		t.Errorf("payments = %+v, want none", all)
	}
}

// testTimeout: the first invocation never answers (in Lambda it is ended
// at the function timeout). Its record stays in flight; once the lease has
// run out, a retry takes the key over and runs.
func testTimeout(t *testing.T, e *env) {
	e.proc.started = make(chan string, 2)
	req := create(t, "timeout-1", charge(200, payments.TokTimeout))
	first := e.sendAsync(req)
	<-e.proc.started

	e.clock.Advance(4 * time.Minute)
	wantProblem(t, e.send(req), 409, dedupe.ProblemInProgress)

	e.clock.Advance(2 * time.Minute) // past the 5 min lease
	second := e.sendAsync(req)
	<-e.proc.started
	if n := e.proc.charges.Load(); n != 2 {
		t.Errorf("charges = %d, want 2 (the retry took the key over)", n)
	}
	close(e.hang)
	for _, r := range []events.APIGatewayV2HTTPResponse{<-first, <-second} {
		wantProblem(t, r, 502, payments.ProblemProcessor)
	}
	if all := e.allPayments(10); len(all) != 0 {
		t.Errorf("payments = %+v, want none", all)
	}
}

func testInvalid(t *testing.T, e *env) {
	tests := []struct {
		name   string
		body   string
		field  string
		reason string // a part of the first error's reason; "" is not checked
	}{
		{"empty body", ``, "body", ""},
		{"not JSON", `amount=1`, "body", ""},
		{"array", `[1]`, "body", ""},
		{"two objects", `{"amount":1,"currency":"EUR","source":"tok_visa"} {}`, "body", ""},
		{"missing amount", `{"currency":"EUR","source":"tok_visa"}`, "amount", "is required"},
		{"null amount", `{"amount":null,"currency":"EUR","source":"tok_visa"}`, "amount", "is required"},
		{"zero amount", charge(0, payments.TokVisa), "amount", "from 1 to"},
		{"negative amount", charge(-5, payments.TokVisa), "amount", ""},
		{"fractional amount", `{"amount":12.5,"currency":"EUR","source":"tok_visa"}`, "amount", ""},
		{"amount as string", `{"amount":"12","currency":"EUR","source":"tok_visa"}`, "amount", ""},
		{"amount too large", charge(payments.MaxAmount+1, payments.TokVisa), "amount", ""},
		{"missing currency", `{"amount":1,"source":"tok_visa"}`, "currency", ""},
		{"short currency", `{"amount":1,"currency":"EU","source":"tok_visa"}`, "currency", ""},
		{"currency with digit", `{"amount":1,"currency":"EU1","source":"tok_visa"}`, "currency", ""},
		{"missing source", `{"amount":1,"currency":"EUR"}`, "source", "is required"},
		{"source too long", charge(1, strings.Repeat("x", 65)), "source", "at most 64"},
		{"unknown source", charge(1, "tok_unknown"), "source", "no such card token"},
		{"unknown field", `{"amount":1,"currency":"EUR","source":"tok_visa","capture":false}`, "capture", ""},
		// encoding/json matches names without regard to case and the last
		// one wins: these would charge 999999999999 where a check in front
		// of the API saw 1.
		{"case-variant field", `{"amount":1,"AMOUNT":999999999999,"currency":"EUR","source":"tok_visa"}`, "amount", "case-sensitive"},
		{"case-variant field alone", `{"Amount":1,"currency":"EUR","source":"tok_visa"}`, "amount", "case-sensitive"},
		{"long s (U+017F) for s", "{\"amount\":1,\"currency\":\"EUR\",\"\u017Fource\":\"tok_visa\"}", "source", "case-sensitive"},
		{"duplicate field", `{"amount":1,"amount":999999999999,"currency":"EUR","source":"tok_visa"}`, "amount", "more than once"},
		{"duplicate source", `{"amount":1,"currency":"EUR","source":"tok_visa","source":"tok_chargeDeclined"}`, "source", "more than once"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := wantProblem(t, e.send(create(t, fmt.Sprintf("invalid-%d", i), tt.body)), 400, payments.ProblemInvalidRequest)
			if len(p.Errors) == 0 || p.Errors[0].Field != tt.field || !strings.Contains(p.Errors[0].Reason, tt.reason) {
				t.Errorf("errors = %+v, want one about %q (%q)", p.Errors, tt.field, tt.reason)
			}
		})
	}
	if all := e.allPayments(10); len(all) != 0 {
		t.Errorf("payments = %+v, want none", all)
	}
	// Lower-case currency is accepted and stored upper-case.
	r := e.send(create(t, "lower", `{"amount":1,"currency":"usd","source":"tok_visa"}`))
	if p := decode[payments.Payment](t, r); r.StatusCode != 201 || p.Currency != "USD" {
		t.Errorf("got %d %s, want 201 in USD", r.StatusCode, r.Body)
	}
	// The largest amount, twelve nines, is accepted.
	r = e.send(create(t, "max", `{"amount":999999999999,"currency":"EUR","source":"tok_visa"}`))
	if p := decode[payments.Payment](t, r); r.StatusCode != 201 || p.Amount != 999_999_999_999 {
		t.Errorf("got %d %s, want 201 for 999999999999", r.StatusCode, r.Body)
	}
}

func testGet(t *testing.T, e *env) {
	created := decode[payments.Payment](t, e.send(create(t, "get-1", charge(4200, payments.TokVisa))))
	r := e.send(get(t, created.ID))
	if got := decode[payments.Payment](t, r); r.StatusCode != 200 || !reflect.DeepEqual(got, created) {
		t.Errorf("get = %d %+v, want 200 %+v", r.StatusCode, got, created)
	}
	wantProblem(t, e.send(get(t, "pay_NOPE")), 404, payments.ProblemNotFound)
}

func testList(t *testing.T, e *env) {
	want := map[string]payments.Payment{}
	for i := range 5 {
		p := decode[payments.Payment](t, e.send(create(t, fmt.Sprintf("list-%d", i), charge(100+i, payments.TokVisa))))
		want[p.ID] = p
	}
	for _, limit := range []int{1, 2, 5, 100} {
		got := e.allPayments(limit)
		if len(got) != len(want) {
			t.Errorf("limit %d: listed %d payments, want %d", limit, len(got), len(want))
		}
		for _, p := range got {
			if !reflect.DeepEqual(p, want[p.ID]) {
				t.Errorf("limit %d: listed %+v, want %+v", limit, p, want[p.ID])
			}
		}
	}
	for _, q := range []map[string]string{{"limit": "0"}, {"limit": "101"}, {"limit": "x"}, {"next": "!!"}} {
		p := wantProblem(t, e.send(list(t, q)), 400, payments.ProblemInvalidRequest)
		if len(p.Errors) != 1 {
			t.Errorf("query %v: errors = %+v, want one", q, p.Errors)
		}
	}
}

func testUnknownRoute(t *testing.T, e *env) {
	req := get(t, "x")
	req.RouteKey = "DELETE /payments/{id}"
	req.RequestContext.HTTP.Method = "DELETE"
	wantProblem(t, e.send(req), 404, payments.ProblemNotFound)
}

// testConcurrent sends 100 identical POSTs at once: one charge, one 201,
// one payment; every other answer is a 409 or a byte-identical replay.
func testConcurrent(t *testing.T, e *env) {
	const n = 100
	req := create(t, "concurrent-1", charge(777, payments.TokVisa))
	var wg sync.WaitGroup
	answers := make([]events.APIGatewayV2HTTPResponse, n)
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			var err error
			if answers[i], err = e.handler(context.Background(), req); err != nil {
				t.Errorf("request %d: %v", i, err)
			}
		})
	}
	close(start)
	wg.Wait()

	var fresh []events.APIGatewayV2HTTPResponse
	var replays []events.APIGatewayV2HTTPResponse
	conflicts := 0
	for i, r := range answers {
		switch {
		case r.StatusCode == 409:
			conflicts++
		case r.StatusCode == 201 && r.Headers[dedupe.HeaderReplayed] == "true":
			replays = append(replays, r)
		case r.StatusCode == 201:
			fresh = append(fresh, r)
		default:
			t.Errorf("request %d: got %d %s, want 201 or 409", i, r.StatusCode, r.Body)
		}
	}
	if len(fresh) != 1 {
		t.Fatalf("got %d fresh 201s, want 1", len(fresh))
	}
	for _, r := range replays {
		sameReplay(t, fresh[0], r)
	}
	if c := e.proc.charges.Load(); c != 1 {
		t.Errorf("charges = %d, want 1", c)
	}
	if all := e.allPayments(100); len(all) != 1 {
		t.Errorf("payments = %d, want 1", len(all))
	}
	t.Logf("1 fresh, %d replays, %d conflicts", len(replays), conflicts)
}

// testOwnPayments: payments are scoped by caller as keys are. Bob does not
// see Alice's payments in his list, cannot read one by ID, and his request
// under Alice's key is his own.
func testOwnPayments(t *testing.T, e *env) {
	alice := decode[payments.Payment](t, e.send(create(t, "own-1", charge(1111, payments.TokVisa))))
	bobsResp := e.send(as("bob", create(t, "own-1", charge(2222, payments.TokVisa))))
	if bobsResp.StatusCode != 201 || bobsResp.Headers[dedupe.HeaderReplayed] != "" {
		t.Fatalf("bob under alice's key: got %d %v %s, want his own fresh 201", bobsResp.StatusCode, bobsResp.Headers, bobsResp.Body)
	}
	bob := decode[payments.Payment](t, bobsResp)
	if bob.ID == alice.ID {
		t.Errorf("bob's payment has alice's ID %s", bob.ID)
	}
	for _, tt := range []struct {
		user string
		want payments.Payment
	}{{"alice", alice}, {"bob", bob}} {
		send := func(ev events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse {
			if tt.user == "alice" {
				return e.send(ev)
			}
			return e.send(as(tt.user, ev))
		}
		r := send(list(t, map[string]string{"limit": "100"}))
		got := decode[struct {
			Payments []payments.Payment `json:"payments"`
		}](t, r).Payments
		if r.StatusCode != 200 || len(got) != 1 || !reflect.DeepEqual(got[0], tt.want) {
			t.Errorf("%s lists %d %+v, want only %+v", tt.user, r.StatusCode, got, tt.want)
		}
		other := alice.ID
		if tt.user == "alice" {
			other = bob.ID
		}
		wantProblem(t, send(get(t, other)), 404, payments.ProblemNotFound)
		if r := send(get(t, tt.want.ID)); r.StatusCode != 200 {
			t.Errorf("%s reads own payment: got %d %s", tt.user, r.StatusCode, r.Body)
		}
	}
}

// testNoIdentity: without an authorizer, nothing is charged, listed or
// read. The template puts AWS_IAM in front of every route, so this is a
// deployment without it, which must not become one anonymous scope.
func testNoIdentity(t *testing.T, e *env) {
	created := decode[payments.Payment](t, e.send(create(t, "anon-1", charge(3333, payments.TokVisa))))
	if r := e.send(as("", create(t, "anon-2", charge(3333, payments.TokVisa)))); r.StatusCode != 500 {
		t.Errorf("POST without identity: got %d %s, want 500", r.StatusCode, r.Body)
	}
	wantProblem(t, e.send(as("", list(t, nil))), 500, payments.ProblemNoIdentity)
	wantProblem(t, e.send(as("", get(t, created.ID))), 500, payments.ProblemNoIdentity)
	if n := e.proc.charges.Load(); n != 1 {
		t.Errorf("charges = %d, want 1", n)
	}
}

func TestNewRequiresRepository(t *testing.T) {
	if _, err := payments.New(payments.Config{}); err == nil {
		t.Error("New without a Repository: got nil error")
	}
}

// downRepo fails every Put while down is set. It is fault injection only:
// everything else goes to the working memory repository.
type downRepo struct {
	*memoryRepo
	down atomic.Bool
	// applied makes a failing Put write the row before it fails, as a
	// write whose reply was lost does.
	applied bool
}

// clashRepo plants another payment of 1000 under the ID of the first
// payment put, just before putting it.
type clashRepo struct {
	*memoryRepo
	earlier payments.Payment
}

func (r *clashRepo) Put(ctx context.Context, p payments.Payment) (payments.Payment, error) {
	if r.earlier.ID == "" {
		r.earlier = p
		r.earlier.Amount = 1000
		if _, err := r.memoryRepo.Put(ctx, r.earlier); err != nil {
			return payments.Payment{}, err
		}
	}
	return r.memoryRepo.Put(ctx, p)
}

func (r *downRepo) Put(ctx context.Context, p payments.Payment) (payments.Payment, error) {
	if r.down.Load() {
		if r.applied {
			r.memoryRepo.Put(ctx, p)
		}
		return payments.Payment{}, fmt.Errorf("put payment %s: connection refused", p.ID)
	}
	return r.memoryRepo.Put(ctx, p)
}

// TestRepositoryUnavailable: when the payments table fails, the answer is
// an error, never a 201 for a payment that has no row, and nothing is
// charged twice. The 503 (with Retry-After) releases the key; the retry
// charges under the same processor key, which the processor answers with
// the first charge, and writes the row.
func TestRepositoryUnavailable(t *testing.T) {
	t.Run("charged", func(t *testing.T) {
		repo := &downRepo{memoryRepo: newMemoryRepo()}
		repo.down.Store(true)
		e := newEnv(t, backend{"down", func(*testing.T) (dedupe.Store, payments.Repository) { return memstore.New(), repo }})
		req := create(t, "down-1", charge(1250, payments.TokVisa))
		wantProblem(t, e.send(req), 503, payments.ProblemUnavailable)
		repo.down.Store(false)
		retry := e.send(req)
		if retry.StatusCode != 201 || retry.Headers[dedupe.HeaderReplayed] != "" {
			t.Fatalf("retry: got %d %v %s, want a fresh 201", retry.StatusCode, retry.Headers, retry.Body)
		}
		p := decode[payments.Payment](t, retry)
		if got := e.send(get(t, p.ID)); got.StatusCode != 200 {
			t.Errorf("GET the answered payment: got %d %s, want 200", got.StatusCode, got.Body)
		}
		if n := e.proc.Processor.(*payments.SimulatedProcessor).Charged(); n != 1 {
			t.Errorf("cards charged = %d, want 1 (the retry's charge is the processor's replay)", n)
		}
	})
	// Issue 17, item 8: a write the table refuses (another payment has the
	// ID) used to be answered 201 and logged "reconcile"; the client was
	// told of a payment GET /payments/{id} showed differently.
	t.Run("refused", func(t *testing.T) {
		// Another payment already holds the ID this request writes: the
		// repository has a different row under it by the time the
		// payment is put. (The ID comes from the claim's downstream key,
		// which names the record's life, so the test cannot compute it
		// ahead; clashRepo plants the other row at the first Put.)
		repo := &clashRepo{memoryRepo: newMemoryRepo()}
		e := newEnv(t, backend{"refused", func(*testing.T) (dedupe.Store, payments.Repository) { return memstore.New(), repo }})
		req := create(t, "refused-1", charge(5000, payments.TokVisa))
		r := e.send(req)
		wantProblem(t, r, 500, payments.ProblemNotRecorded)
		if repo.earlier.ID == "" {
			t.Fatal("no payment was put")
		}
		if got, err := repo.Get(context.Background(), repo.earlier.ID); err != nil || got.Amount != 1000 {
			t.Errorf("the earlier payment = %+v, %v; want it untouched", got, err)
		}
	})
	t.Run("declined", func(t *testing.T) {
		repo := &downRepo{memoryRepo: newMemoryRepo()}
		repo.down.Store(true)
		e := newEnv(t, backend{"down", func(*testing.T) (dedupe.Store, payments.Repository) { return memstore.New(), repo }})
		req := create(t, "down-2", charge(1250, payments.TokChargeDeclined))
		r := e.send(req)
		wantProblem(t, r, 503, payments.ProblemUnavailable)
		if ra := r.Headers["Retry-After"]; ra != "1" {
			t.Errorf("Retry-After = %q, want 1", ra)
		}
		repo.down.Store(false)
		if r := e.send(req); r.StatusCode != 402 || r.Headers[dedupe.HeaderReplayed] != "" {
			t.Errorf("retry: got %d %v %s, want a fresh 402", r.StatusCode, r.Headers, r.Body)
		}
	})
	// The chaos run found this one: the declined payment's row was written
	// but its reply lost in the outage, so the 503 released the key and
	// the retry recorded the payment again. The retry's row has the same
	// ID (derived from the key), so there is still one row.
	t.Run("declined, row written but its reply lost", func(t *testing.T) {
		mem := newMemoryRepo()
		repo := &downRepo{memoryRepo: mem, applied: true}
		repo.down.Store(true)
		e := newEnv(t, backend{"lost", func(*testing.T) (dedupe.Store, payments.Repository) { return memstore.New(), repo }})
		req := create(t, "lost-1", charge(1250, payments.TokChargeDeclined))
		wantProblem(t, e.send(req), 503, payments.ProblemUnavailable)
		repo.down.Store(false)
		if r := e.send(req); r.StatusCode != 402 {
			t.Errorf("retry: got %d %s, want 402", r.StatusCode, r.Body)
		}
		mem.mu.Lock()
		n := len(mem.payments)
		mem.mu.Unlock()
		if n != 1 {
			t.Errorf("%d payment rows, want 1", n)
		}
	})
}
