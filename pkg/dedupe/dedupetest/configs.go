package dedupetest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
)

// ConfigCheck configures CheckConfigs.
type ConfigCheck struct {
	// NewStore returns an empty store for one history. Every guard of the
	// history (several services, stages and event sources) shares it.
	NewStore func(t *testing.T) dedupe.Store

	// Histories is the number of random histories. Zero means the value
	// of DEDUPE_CONFIG_HISTORIES, else 300 (well under a second on memstore, a few seconds with -race).
	// Set DEDUPE_CONFIG_HISTORIES=1000000 for a run of minutes.
	Histories int

	// Seed seeds the first history; history i uses Seed+i. Zero means the
	// value of DEDUPE_CONFIG_SEED, else a random seed. A failure names
	// the seed that replays it.
	Seed uint64
}

// The adapters CheckConfigs draws.
var configAdapters = []string{"HTTPAPI", "RESTAPI", "FunctionURL", "Middleware", "SQSBatch", "SQSBatch-FIFO", "KinesisBatch", "DynamoDBBatch", "Do", "RunJSON"}

// The principal sources CheckConfigs draws for the HTTP adapters.
var configPrincipals = []string{"jwt", "cognito", "iam", "lambda-id", "lambda-no-identity", "lambda-volatile", "none", "func"}

// CheckConfigs runs randomized histories in which each history also draws
// its configuration, as issue 17 asks: the adapter, the principal
// source, the prefix (a Prefix, the function name only, or neither), the
// options (SharedScope, FailOpen with claim failures, Cache, Wait,
// Heartbeat on a store that may lack LeaseExtender, MinHold, Retention,
// Keep, key functions), and sharing (two services, tenants, stages and
// event sources on one store, sending the same keys with the same
// payloads).
//
// New (or the adapter) either refuses the configuration with a panic
// starting with "dedupe: ", which is checked to be one of the refusals
// the configuration calls for, or every history keeps these invariants:
//
//   - at most one effect per request in its scope (the handlers charge a
//     model processor that deduplicates on Claim.DownstreamKey);
//   - no answer crosses a service, tenant, stage or event source;
//   - no message is lost: an item reported processed or duplicate has had
//     its work done in its own scope and life;
//   - a request's downstream key is the same across its attempts and
//     takeovers, and different for different requests and for the same
//     key once its record has expired;
//   - exactly one event per request that reaches the guard;
//   - replays are byte-exact.
//
// CheckConfigs sets AWS_LAMBDA_FUNCTION_NAME with t.Setenv: do not call it
// from a parallel test.
func CheckConfigs(t *testing.T, cfg ConfigCheck) {
	t.Helper()
	n, seed := runs(cfg.Histories, cfg.Seed, "DEDUPE_CONFIG", 300)
	t.Logf("CheckConfigs: %d histories from seed %d (replay with DEDUPE_CONFIG_SEED=%d)", n, seed, seed)
	refused := 0
	for i := range n {
		s := seed + uint64(i)
		h := newConfigHistory(t, s, cfg.NewStore(t))
		if h.build() {
			h.run()
		} else {
			refused++
		}
		if len(h.violations) > 0 {
			t.Fatalf("seed %d (DEDUPE_CONFIG_SEED=%d DEDUPE_CONFIG_HISTORIES=1), configuration %s:\n%s", s, s, h.describe(), strings.Join(h.violations, "\n"))
		}
	}
	t.Logf("CheckConfigs: %d histories, %d refused at construction", n, refused)
	checkHandlersOn(t, cfg.NewStore, n, seed) // Handler, its types and expressions: handlercheck.go
}

// configHistory is one history of CheckConfigs: a configuration, the
// guards built from it, and what the model saw.
type configHistory struct {
	t     *testing.T
	rng   *rand.Rand
	store dedupe.Store
	clock atomic.Int64

	// The drawn configuration.
	adapter    string
	principal  string
	prefixMode string // "prefix", "function", "neither"
	shared     bool   // HTTPConfig.SharedScope
	failOpen   bool
	claimFails bool // the store fails some claims transiently
	cache      bool
	wait       bool
	heartbeat  bool
	extender   bool // the store offers LeaseExtender
	minHold    time.Duration
	retention  time.Duration
	keepAll    bool // HTTPConfig.Keep stores every status
	keyFunc    bool // a key function instead of the default key
	shareSrc   bool // ShareSources on the batch adapters

	services []*configService
	epoch    int // advanced when every record has expired

	mu         sync.Mutex
	events     int               // events the guards emitted
	reached    int               // requests that reached a guard
	dks        map[string]string // downstream key -> request identity
	life       map[string]string // request identity -> guarded downstream key
	effects    map[string]int    // request identity -> effects charged
	work       map[string]bool   // request identity -> work done
	answers    map[string]string // request identity -> first fresh answer body
	violations []string
}

// configService is one guard of a history: a service on the shared store.
type configService struct {
	name  string
	guard *dedupe.Guard
}

func newConfigHistory(t *testing.T, seed uint64, store dedupe.Store) *configHistory {
	h := &configHistory{
		t:       t,
		rng:     rand.New(rand.NewPCG(seed, seed^0x5afe0f10a)),
		store:   store,
		dks:     map[string]string{},
		life:    map[string]string{},
		effects: map[string]int{},
		work:    map[string]bool{},
		answers: map[string]string{},
	}
	h.clock.Store(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	r := h.rng
	h.adapter = configAdapters[r.IntN(len(configAdapters))]
	h.principal = configPrincipals[r.IntN(len(configPrincipals))]
	h.prefixMode = []string{"prefix", "prefix", "prefix", "function", "function", "neither"}[r.IntN(6)]
	h.shared = r.IntN(3) == 0
	h.failOpen = r.IntN(3) == 0
	h.claimFails = r.IntN(3) == 0
	h.cache = r.IntN(2) == 0
	h.wait = r.IntN(3) == 0
	h.heartbeat = r.IntN(4) == 0
	h.extender = r.IntN(2) == 0
	h.minHold = []time.Duration{0, 0, 10 * time.Minute}[r.IntN(3)]
	h.retention = []time.Duration{0, 0, 0, 0, time.Hour, 2 * time.Minute, time.Second, -time.Hour}[r.IntN(8)]
	h.keepAll = r.IntN(2) == 0
	h.keyFunc = r.IntN(2) == 0
	h.shareSrc = r.IntN(4) == 0
	return h
}

func (h *configHistory) describe() string {
	return fmt.Sprintf("adapter=%s principal=%s prefix=%s SharedScope=%v FailOpen=%v claimFails=%v Cache=%v Wait=%v Heartbeat=%v extender=%v MinHold=%v Retention=%v keepAll=%v keyFunc=%v ShareSources=%v",
		h.adapter, h.principal, h.prefixMode, h.shared, h.failOpen, h.claimFails, h.cache, h.wait, h.heartbeat, h.extender, h.minHold, h.retention, h.keepAll, h.keyFunc, h.shareSrc)
}

func (h *configHistory) now() time.Time { return time.Unix(0, h.clock.Load()) }

func (h *configHistory) violate(format string, args ...any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.violations) < 10 {
		h.violations = append(h.violations, fmt.Sprintf(format, args...))
	}
}

// wantRefusal returns the refusals the configuration calls for: the
// option names a refusal must mention; empty when it must be accepted.
func (h *configHistory) wantRefusal() []string {
	var want []string
	if h.prefixMode == "neither" {
		want = append(want, "Config.Prefix")
	}
	if h.retention < 0 || (h.retention > 0 && h.retention < dedupe.MinRetention) {
		want = append(want, "Config.Retention")
	}
	if h.heartbeat && !h.extender {
		want = append(want, "Config.Heartbeat")
	}
	return want
}

// build constructs the history's guards, two services on one store, and
// reports false when construction was refused (as it must be exactly
// when wantRefusal says so).
func (h *configHistory) build() (ok bool) {
	want := h.wantRefusal()
	defer func() {
		r := recover()
		if r == nil {
			if len(want) > 0 {
				h.violate("configuration accepted, want a refusal naming one of %v", want)
			}
			return
		}
		msg := fmt.Sprint(r)
		ok = false
		if !strings.HasPrefix(msg, "dedupe: ") {
			panic(r)
		}
		named := false
		for _, w := range want {
			named = named || strings.Contains(msg, w)
		}
		if !named {
			h.violate("construction refused with %q, want it accepted or refused for one of %v", msg, want)
		}
	}()
	var store dedupe.Store = &configStore{Store: h.store, h: h}
	if h.extender {
		store = &configExtender{configStore: store.(*configStore)}
	}
	for _, name := range []string{"svc-a", "svc-b"} {
		cfg := &dedupe.Config{
			Now:       h.now,
			FailOpen:  h.failOpen,
			MinHold:   h.minHold,
			Retention: h.retention,
			Logger:    discard,
			Sleep: func(ctx context.Context, d time.Duration) error {
				h.clock.Add(int64(d))
				return nil
			},
			NewTicker: func(time.Duration) (<-chan time.Time, func()) { return nil, func() {} },
			OnOutcome: func(context.Context, dedupe.Event) {
				h.mu.Lock()
				h.events++
				h.mu.Unlock()
			},
		}
		switch h.prefixMode {
		case "prefix":
			cfg.Prefix = name
			h.t.Setenv("AWS_LAMBDA_FUNCTION_NAME", "")
		case "function":
			h.t.Setenv("AWS_LAMBDA_FUNCTION_NAME", name)
		default:
			h.t.Setenv("AWS_LAMBDA_FUNCTION_NAME", "")
		}
		if h.cache {
			cfg.Cache = dedupe.NewCache(0, 0)
		}
		if h.wait {
			cfg.Wait = time.Second
		}
		if h.heartbeat {
			cfg.Heartbeat = time.Second
		}
		h.services = append(h.services, &configService{name: name, guard: dedupe.New(store, cfg)})
	}
	return true
}

// request is one logical request of a history: who sends which key from
// where. Its identity is its scope and the epoch (the record's life).
type request struct {
	svc    int
	tenant string
	stage  string // API stage, or event source ARN
	key    string
}

// scopeTenant returns the tenant a request is scoped by: its own, or
// "anon" when its principal source carries no identity and the adapter
// lets anonymous callers share a scope.
func (h *configHistory) scopeTenant(tenant string) string {
	if h.isBatch() || h.adapter == "Do" || h.adapter == "RunJSON" {
		return "-"
	}
	if !h.identified() {
		return "anon"
	}
	return tenant
}

// identified reports whether the drawn principal source identifies the
// caller.
func (h *configHistory) identified() bool {
	switch h.principal {
	case "lambda-no-identity", "lambda-volatile", "none":
		return false
	case "jwt", "cognito", "lambda-id":
		return h.adapter != "FunctionURL" && h.adapter != "Middleware"
	case "iam":
		return h.adapter != "Middleware"
	}
	return true // func
}

func (h *configHistory) isBatch() bool {
	return strings.HasSuffix(h.adapter, "Batch") || h.adapter == "SQSBatch-FIFO"
}

// identity names a request's scope and life.
func (h *configHistory) identity(r request) string {
	stage := r.stage
	if h.isBatch() && h.shareSrc {
		stage = "*"
	}
	if h.adapter == "Do" || h.adapter == "RunJSON" || h.adapter == "Middleware" {
		stage = "-" // no stage in the scope: a server is one deployment per Prefix
	}
	return fmt.Sprintf("%s|%s|%s|%s|life%d", h.services[r.svc].name, stage, h.scopeTenant(r.tenant), r.key, h.epoch)
}

// run sends the history's requests: a few keys, shared by two services,
// tenants and stages or sources, each sent up to three times, with the
// clock moved past every record's expiry now and then.
func (h *configHistory) run() {
	tenants := []string{"alice", "bob"}
	stages := []string{"prod", "test"}
	keys := []string{"order-1", "order-2", "order-3"}
	steps := 8 + h.rng.IntN(16)
	for range steps {
		if h.rng.IntN(8) == 0 {
			// Every record expires: the same keys start new lives.
			h.clock.Add(int64(48*time.Hour + time.Hour))
			h.epoch++
		}
		r := request{svc: h.rng.IntN(2), tenant: tenants[h.rng.IntN(2)], stage: stages[h.rng.IntN(2)], key: keys[h.rng.IntN(len(keys))]}
		for range 1 + h.rng.IntN(3) {
			h.clock.Add(int64(time.Duration(h.rng.IntN(2000)) * time.Millisecond))
			h.send(r)
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.events != h.reached {
		h.violations = append(h.violations, fmt.Sprintf("%d events for %d requests that reached a guard, want exactly one each", h.events, h.reached))
	}
}

// charge is the guarded work: it checks the claim, charges the model
// processor once per downstream key, and marks the request's work done.
// It returns the answer body, which names the scope it ran in.
func (h *configHistory) charge(ctx context.Context, id string) string {
	c, ok := dedupe.ClaimFrom(ctx)
	dk := c.DownstreamKey()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.work[id] = true
	switch {
	case !ok || dk == "":
		h.violations = append(h.violations, fmt.Sprintf("%s: the work ran without a downstream key (claim %+v, %v)", id, c, ok))
	default:
		if other, seen := h.dks[dk]; seen && other != id {
			h.violations = append(h.violations, fmt.Sprintf("downstream key %s used by %s and by %s: one request's charge answers another", dk, other, id))
		}
		if !seen(h.dks, dk) {
			h.dks[dk] = id
			if !c.Unguarded {
				h.effects[id]++
			}
		}
		if !c.Unguarded {
			if prev, ok := h.life[id]; ok && prev != dk {
				h.violations = append(h.violations, fmt.Sprintf("%s: downstream key changed across attempts: %s then %s", id, prev, dk))
			}
			h.life[id] = dk
		}
		if h.effects[id] > 1 && !c.Unguarded {
			h.violations = append(h.violations, fmt.Sprintf("%s: %d effects, want at most one", id, h.effects[id]))
		}
	}
	return "answer for " + id
}

func seen(m map[string]string, k string) bool { _, ok := m[k]; return ok }

// answered checks one answer body a sender received for its request.
func (h *configHistory) answered(id, body string, replayed bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if want := "answer for " + id; body != want {
		h.violations = append(h.violations, fmt.Sprintf("%s received %q: an answer crossed a scope", id, body))
		return
	}
	if first, ok := h.answers[id]; ok && replayed && first != body {
		h.violations = append(h.violations, fmt.Sprintf("%s: replay %q differs from the first answer %q", id, body, first))
	}
	if _, ok := h.answers[id]; !ok {
		h.answers[id] = body
	}
}

func (h *configHistory) reach() {
	h.mu.Lock()
	h.reached++
	h.mu.Unlock()
}

// send sends one attempt of r through the drawn adapter.
func (h *configHistory) send(r request) {
	id := h.identity(r)
	svc := h.services[r.svc]
	ctx := context.Background()
	switch h.adapter {
	case "Do", "RunJSON":
		h.reach()
		payload := []byte(`{"order":"` + r.key + `"}`)
		fn := func(ctx context.Context) (string, error) { return h.charge(ctx, id), nil }
		var v string
		var err error
		replayed := false
		if h.adapter == "Do" {
			var a dedupe.Answer[string]
			a, err = dedupe.Do(ctx, svc.guard, r.key, payload, fn)
			v, replayed = a.Value, a.Replayed
		} else {
			v, err = dedupe.RunJSON(ctx, svc.guard, r.key, payload, fn)
		}
		if v != "" {
			h.answered(id, v, replayed)
		} else if err == nil {
			h.violate("%s: no value and no error", id)
		}
	case "SQSBatch", "SQSBatch-FIFO", "KinesisBatch", "DynamoDBBatch":
		h.sendBatch(r, id, svc)
	default:
		h.sendHTTP(r, id, svc)
	}
}

// sendBatch sends r as a batch of one item, and checks that an item
// reported processed or duplicate had its work done.
func (h *configHistory) sendBatch(r request, id string, svc *configService) {
	ctx := context.Background()
	body := `{"order":"` + r.key + `"}`
	arn := "arn:aws:sqs:eu-west-1:123456789012:" + r.stage
	// Sometimes the item function fails after a nested guarded call of
	// its own failed to record (ErrNotStored), without doing the work.
	nestedFail := h.rng.IntN(4) == 0
	var status dedupe.ItemStatus
	onItem := func(o dedupe.ItemOutcome) { status = o.Status }
	work := func(ctx context.Context) error {
		if nestedFail {
			return fmt.Errorf("nested RunJSON: %w", dedupe.ErrNotStored)
		}
		h.charge(ctx, id)
		return nil
	}
	h.reach()
	switch h.adapter {
	case "SQSBatch", "SQSBatch-FIFO":
		if h.adapter == "SQSBatch-FIFO" {
			arn += ".fifo"
		}
		key := r.key
		m := events.SQSMessage{MessageId: fmt.Sprint("m-", h.rng.Uint64()), Body: body, EventSourceARN: arn,
			MessageAttributes: map[string]events.SQSMessageAttribute{dedupe.SQSKeyAttribute: {StringValue: &key, DataType: "String"}}}
		cfg := &dedupe.SQSConfig{OnItem: onItem, ShareSources: h.shareSrc, Logger: discard}
		if h.keyFunc {
			cfg.Key = func(m events.SQSMessage) string {
				return strings.TrimSuffix(strings.TrimPrefix(m.Body, `{"order":"`), `"}`)
			}
		}
		dedupe.SQSBatch(ctx, svc.guard, events.SQSEvent{Records: []events.SQSMessage{m}}, cfg, func(ctx context.Context, _ events.SQSMessage) error { return work(ctx) })
	case "KinesisBatch":
		rec := events.KinesisEventRecord{EventID: r.key, EventSourceArn: strings.Replace(arn, ":sqs:", ":kinesis:", 1),
			Kinesis: events.KinesisRecord{SequenceNumber: fmt.Sprint(h.rng.Uint64()), Data: []byte(body)}}
		dedupe.KinesisBatch(ctx, svc.guard, events.KinesisEvent{Records: []events.KinesisEventRecord{rec}},
			&dedupe.KinesisConfig{OnItem: onItem, ShareSources: h.shareSrc, Logger: discard}, func(ctx context.Context, _ events.KinesisEventRecord) error { return work(ctx) })
	case "DynamoDBBatch":
		rec := events.DynamoDBEventRecord{EventID: r.key, EventName: "INSERT", EventSourceArn: strings.Replace(arn, ":sqs:", ":dynamodb:", 1),
			Change: events.DynamoDBStreamRecord{SequenceNumber: fmt.Sprint(h.rng.Uint64())}}
		dedupe.DynamoDBBatch(ctx, svc.guard, events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{rec}},
			&dedupe.DynamoDBConfig{OnItem: onItem, ShareSources: h.shareSrc, Logger: discard}, func(ctx context.Context, _ events.DynamoDBEventRecord) error { return work(ctx) })
	}
	h.mu.Lock()
	done := h.work[id]
	h.mu.Unlock()
	if (status == dedupe.ItemProcessed || status == dedupe.ItemDuplicate || status == dedupe.ItemUnrecorded) && !done {
		h.violate("%s: item reported %s but its work was never done: the message is lost", id, status)
	}
}

// principalOf returns the principal function, and the authorizer shape
// applied to an event, for the drawn principal source.
func (h *configHistory) authorizer(tenant string) map[string]any {
	switch h.principal {
	case "lambda-id":
		return map[string]any{"userId": tenant, "authTime": h.rng.IntN(1 << 30)}
	case "lambda-no-identity":
		return map[string]any{"role": "buyer", "plan": "pro"}
	case "lambda-volatile":
		return map[string]any{"role": "buyer", "authTime": h.rng.IntN(1 << 30), "nonce": fmt.Sprint(h.rng.Uint64())}
	}
	return nil
}

// sendHTTP sends r through one of the HTTP adapters and checks the
// answer.
func (h *configHistory) sendHTTP(r request, id string, svc *configService) {
	ctx := context.Background()
	body := `{"order":"` + r.key + `"}`
	cfg := &dedupe.HTTPConfig{SharedScope: h.shared, Logger: discard}
	if h.principal == "func" || h.adapter == "Middleware" && h.identified() {
		cfg.Principal = func(req any) string {
			switch ev := req.(type) {
			case *http.Request:
				return ev.Header.Get("X-Tenant")
			case *events.APIGatewayV2HTTPRequest:
				return ev.Headers["x-tenant"]
			case *events.APIGatewayProxyRequest:
				return ev.Headers["x-tenant"]
			case *events.LambdaFunctionURLRequest:
				return ev.Headers["x-tenant"]
			}
			return ""
		}
	}
	if h.keepAll {
		cfg.Keep = func(int) bool { return true }
	}
	if h.keyFunc {
		cfg.KeyHeader = "X-Order-Key"
	}
	if h.adapter == "Middleware" && cfg.Principal == nil && !cfg.SharedScope {
		// Middleware refuses this at construction: check that it does.
		defer func() {
			if r := recover(); r == nil {
				h.violate("Middleware without Principal or SharedScope was accepted")
			}
		}()
		dedupe.Middleware(svc.guard, cfg)
		return
	}
	headers := map[string]string{"x-tenant": r.tenant, "content-type": "application/json"}
	if h.keyFunc {
		headers["x-order-key"] = r.key
	} else {
		headers["idempotency-key"] = r.key
	}
	wantRefused := !h.identified() && !h.shared
	h.reach()
	var status int
	var respBody string
	var replayed bool
	switch h.adapter {
	case "HTTPAPI":
		ev := events.APIGatewayV2HTTPRequest{RouteKey: "POST /orders", RawPath: "/orders", Headers: headers, Body: body,
			RequestContext: events.APIGatewayV2HTTPRequestContext{APIID: "api1", Stage: r.stage, HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "POST", Path: "/orders"}}}
		switch h.principal {
		case "jwt", "cognito":
			ev.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{JWT: &events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription{Claims: map[string]string{"iss": "https://idp", "sub": r.tenant, "iat": fmt.Sprint(h.rng.IntN(1 << 30))}}}
		case "iam":
			ev.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{IAM: &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{UserARN: "arn:aws:iam::1:user/" + r.tenant}}
		default:
			if a := h.authorizer(r.tenant); a != nil {
				ev.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{Lambda: a}
			}
		}
		resp, err := dedupe.HTTPAPI(svc.guard, cfg, func(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
			return events.APIGatewayV2HTTPResponse{StatusCode: 201, Body: h.charge(ctx, id)}, nil
		})(ctx, ev)
		if err != nil {
			h.violate("%s: HTTPAPI error %v", id, err)
		}
		status, respBody, replayed = resp.StatusCode, resp.Body, resp.Headers[dedupe.HeaderReplayed] == "true"
	case "RESTAPI":
		ev := events.APIGatewayProxyRequest{Resource: "/orders", Path: "/orders", HTTPMethod: "POST", Headers: headers, Body: body,
			RequestContext: events.APIGatewayProxyRequestContext{APIID: "api1", Stage: r.stage}}
		switch h.principal {
		case "jwt", "cognito":
			ev.RequestContext.Authorizer = map[string]any{"claims": map[string]any{"iss": "https://idp", "sub": r.tenant, "auth_time": h.rng.IntN(1 << 30)}}
		case "iam":
			ev.RequestContext.Identity.UserArn = "arn:aws:iam::1:user/" + r.tenant
		default:
			if a := h.authorizer(r.tenant); a != nil {
				ev.RequestContext.Authorizer = a
			}
		}
		resp, err := dedupe.RESTAPI(svc.guard, cfg, func(ctx context.Context, ev events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
			return events.APIGatewayProxyResponse{StatusCode: 201, Body: h.charge(ctx, id)}, nil
		})(ctx, ev)
		if err != nil {
			h.violate("%s: RESTAPI error %v", id, err)
		}
		status, respBody, replayed = resp.StatusCode, resp.Body, resp.Headers[dedupe.HeaderReplayed] == "true"
	case "FunctionURL":
		ev := events.LambdaFunctionURLRequest{RawPath: "/orders", Headers: headers, Body: body,
			RequestContext: events.LambdaFunctionURLRequestContext{DomainName: r.stage + ".lambda-url.eu-west-1.on.aws", HTTP: events.LambdaFunctionURLRequestContextHTTPDescription{Method: "POST", Path: "/orders"}}}
		if h.principal == "iam" {
			ev.RequestContext.Authorizer = &events.LambdaFunctionURLRequestContextAuthorizerDescription{IAM: &events.LambdaFunctionURLRequestContextAuthorizerIAMDescription{UserARN: "arn:aws:iam::1:user/" + r.tenant}}
		}
		resp, err := dedupe.FunctionURL(svc.guard, cfg, func(ctx context.Context, ev events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error) {
			return events.LambdaFunctionURLResponse{StatusCode: 201, Body: h.charge(ctx, id)}, nil
		})(ctx, ev)
		if err != nil {
			h.violate("%s: FunctionURL error %v", id, err)
		}
		status, respBody, replayed = resp.StatusCode, resp.Body, resp.Headers[dedupe.HeaderReplayed] == "true"
	case "Middleware":
		mw := dedupe.Middleware(svc.guard, cfg)(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			w.WriteHeader(201)
			w.Write([]byte(h.charge(req.Context(), id)))
		}))
		req := httptest.NewRequest("POST", "/orders", strings.NewReader(body))
		req.Pattern = "POST /orders"
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		w := httptest.NewRecorder()
		mw.ServeHTTP(w, req)
		status, respBody, replayed = w.Code, w.Body.String(), w.Header().Get(dedupe.HeaderReplayed) == "true"
	}
	switch {
	case status == 201:
		if wantRefused {
			h.violate("%s: answered 201 with no principal and SharedScope off", id)
		}
		h.answered(id, respBody, replayed)
	case status == 500 && wantRefused:
	case status == 409 || status == 503:
	default:
		h.violate("%s: unexpected status %d %q", id, status, respBody)
	}
}

// discard is the Logger of every guard CheckConfigs builds.
var discard = slog.New(slog.DiscardHandler)

// configStore wraps the history's store: it fails some claims transiently
// when the history draws claim failures, and hides LeaseExtender.
type configStore struct {
	dedupe.Store
	h *configHistory
}

func (s *configStore) Claim(ctx context.Context, req dedupe.ClaimRequest) (dedupe.ClaimResult, error) {
	if s.h.claimFails && s.h.rng.IntN(4) == 0 {
		return dedupe.ClaimResult{}, fmt.Errorf("configcheck: throttled: %w", dedupe.ErrStoreUnavailable)
	}
	return s.Store.Claim(ctx, req)
}

// configExtender is a configStore that offers LeaseExtender when the
// underlying store does.
type configExtender struct{ *configStore }

func (s *configExtender) Extend(ctx context.Context, req dedupe.ExtendRequest) error {
	if ext, ok := s.Store.(dedupe.LeaseExtender); ok {
		return ext.Extend(ctx, req)
	}
	return errors.New("configcheck: the store under test cannot extend")
}
