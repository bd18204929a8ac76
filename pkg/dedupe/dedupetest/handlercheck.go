package dedupetest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
)

// CheckHandlers runs randomized histories of dedupe.Handler, as issue 30
// asks. Each history draws an event type In (a struct of its own, a map,
// raw JSON, EventBridge, API Gateway, and types that can never be
// scoped: ALB, WebSocket, structs that would receive an HTTP request's
// requestContext), a result type Out (a struct, a map of int64 values, an
// any holding a struct, a struct holding one in an interface, an API
// Gateway response with 5xx and 429 answers, a MarshalJSON that fails or
// panics, a type encoding/json cannot encode), and key, scope and
// fingerprint expressions (functions, projections, fallbacks, and
// expressions that can never work). It sends events with fields
// missing, null, numeric, beyond float64 and nested, each a few times,
// some changed in one field between sends.
//
// A reference model (handlerref.go) says, per event, what the key, scope
// and fingerprint select and whether the documented rules accept them.
// The invariants:
//
//   - construction refuses exactly what the types and expressions decide
//     (an expression that can never work, a type that can never be
//     scoped or stored), with a message naming it;
//   - an event is refused exactly when the reference refuses it, and the
//     handler does not run;
//   - a duplicate is answered only with the answer of a run whose
//     request had the same scope, key and fingerprint, so two requests
//     that differ in what the handler sees (the whole event by default)
//     never share an answer; the answer is the first one byte for byte;
//   - the handler runs at most once per scope and key while a run is
//     recorded (a 5xx, 408, 425 or 429 answer, or a handler error,
//     releases it), also when the result fails to encode;
//   - a conflict (ErrFingerprintMismatch) only for a different
//     fingerprint, ErrResultOmitted only after a result was not kept;
//   - no event value appears in an error, a problem response or a log
//     line.
//
// It prints its seed; histories and seed come from cfg, else from
// DEDUPE_HANDLER_HISTORIES (default 200) and DEDUPE_HANDLER_SEED.
func CheckHandlers(t *testing.T, cfg ConfigCheck) {
	t.Helper()
	n, seed := runs(cfg.Histories, cfg.Seed, "DEDUPE_HANDLER", 200)
	checkHandlerHistories(t, cfg.NewStore, n, seed, "DEDUPE_HANDLER")
}

// checkHandlersOn is CheckConfigs' part of CheckHandlers: a tenth of its
// n histories (at least one), on one store of newStore, each history
// under a prefix of its own, so that every store CheckConfigs checks
// also stores and replays Handler's results.
func checkHandlersOn(t *testing.T, cfg ConfigCheck, n int, seed uint64) {
	t.Helper()
	var store dedupe.Store
	if cfg.NewStoreFor != nil {
		store = cfg.NewStoreFor(t, StoreConfig{Inject: func(string) Fault { return FaultNone }}) // its plain configuration, no faults
	} else {
		store = cfg.NewStore(t)
	}
	checkHandlerHistories(t, func(*testing.T) dedupe.Store { return store }, max(1, n/10), seed, "DEDUPE_CONFIG")
}

// checkHandlerHistories runs n handler histories from seed; env names
// the variables that replay one.
func checkHandlerHistories(t *testing.T, newStore func(*testing.T) dedupe.Store, n int, seed uint64, env string) {
	t.Helper()
	t.Logf("CheckHandlers: %d histories from seed %d (replay with %s_SEED=%d)", n, seed, env, seed)
	refused := 0
	var total hcCounts
	for i := range n {
		s := seed + uint64(i)
		h := newHCHistory(s, newStore(t))
		if h.build() {
			h.run()
		} else {
			refused++
		}
		h.checkLeaks()
		total.add(h.counts)
		if len(h.violations) > 0 {
			t.Fatalf("seed %d (%s_SEED=%d %s_HISTORIES=1), %s:\n%s", s, env, s, env, h.describe(), strings.Join(h.violations, "\n"))
		}
	}
	t.Logf("CheckHandlers: %d histories, %d refused at construction; %d requests: %d refused, %d runs, %d replays, %d conflicts, %d without a stored result",
		n, refused, total.requests, total.refused, total.runs, total.replays, total.conflicts, total.omitted)
}

// The event and result types CheckHandlers draws: those Handler takes
// (a map holding an HTTP request is refused per event), and those it
// must refuse at construction.
var (
	hcIns     = []string{"struct", "struct", "map", "raw", "rc-map", "eventbridge", "eventbridge"}
	hcBadIns  = []string{"alb", "websocket", "rc-struct", "rc-embedded", "apigw", "sqs"}
	hcOuts    = []string{"receipt", "receipt", "map", "any", "holder", "http", "http", "panicky"}
	hcBadOuts = []string{"chan"}
)

// hcBroken is what a history breaks, so that construction must refuse
// it, with the weight of each: seven histories in sixteen break one
// thing.
var hcBroken = []string{"", "", "", "", "", "", "", "", "", "key", "key", "fp", "in", "out", "scope", "no-scope"}

// pick returns an element of list.
func pick[T any](r *rand.Rand, list []T) T { return list[r.IntN(len(list))] }

// drawExpr draws an expression that must be accepted, or, when bad,
// one that must be refused.
func drawExpr(r *rand.Rand, exprs []hcExpr, bad bool) hcExpr {
	var good, refused []hcExpr
	for _, e := range exprs {
		if e.bad == "" {
			good = append(good, e)
		} else {
			refused = append(refused, e)
		}
	}
	if bad {
		return pick(r, refused)
	}
	return pick(r, good)
}

// hcHistory is one history of CheckHandlers.
type hcHistory struct {
	seed  uint64
	rng   *rand.Rand
	store dedupe.Store
	guard *dedupe.Guard
	logs  *syncBuffer

	in, out        string
	key, fp, scope hcExpr
	noScope        bool
	handler        hcSend // the built handler
	secrets        map[string]bool
	errs           []string // every error and problem body seen
	cur            hcRequest
	states         map[string]*hcIdentity // scope|key -> what the store should hold
	views          map[string]hcView      // digest of what a run saw -> its request's view
	violations     []string
	counts         hcCounts
	ranCount       int
}

// hcCounts counts what the requests of histories met.
type hcCounts struct{ requests, refused, runs, replays, conflicts, omitted int }

func (c *hcCounts) add(d hcCounts) {
	c.requests += d.requests
	c.refused += d.refused
	c.runs += d.runs
	c.replays += d.replays
	c.conflicts += d.conflicts
	c.omitted += d.omitted
}

// hcView is what identifies a request: its scope, key and fingerprint
// as the reference model computes them.
type hcView struct{ scope, key, fp string }

// hcRequest is the request being sent.
type hcRequest struct {
	view     hcView
	refusal  error  // the refusal the reference expects, nil for none
	mode     string // what the handler does: "ok", "fail", "panic", "error"
	status   int    // the status of an HTTP result
	ran      bool
	hooked   bool // HandlerConfig.OnReplay was called
	describe string
}

// hcIdentity is what the model knows of one scope and key.
type hcIdentity struct {
	claimed  bool
	fp       string // the fingerprint of its first claim
	recorded bool   // a run is recorded: no other may run
	omitted  bool   // recorded without its result
	answer   []byte // the JSON of the recorded answer
}

func newHCHistory(seed uint64, store dedupe.Store) *hcHistory {
	h := &hcHistory{seed: seed, rng: rand.New(rand.NewPCG(seed, seed^0x4a11d1e)), store: store,
		logs: &syncBuffer{}, secrets: map[string]bool{}, states: map[string]*hcIdentity{}, views: map[string]hcView{}}
	r := h.rng
	broken := pick(r, hcBroken)
	h.in, h.out = pick(r, hcIns), pick(r, hcOuts)
	switch broken {
	case "in":
		h.in = pick(r, hcBadIns)
	case "out":
		h.out = pick(r, hcBadOuts)
	case "scope", "no-scope":
		if !h.custom() {
			h.in = "struct"
		}
	}
	base, order := "", func(t any) rv { return root(t) }
	switch h.in {
	case "eventbridge":
		base, order = "detail", func(t any) rv { return get(root(t), "detail") }
	case "apigw":
		base, order = "powertools_json(body)", func(t any) rv { return pjson(get(root(t), "body")) }
	}
	h.key = drawExpr(r, hcKeyExprs(base, order), broken == "key")
	h.fp = drawExpr(r, hcFingerprintExprs(base, order), broken == "fp")
	if h.custom() {
		h.scope = drawExpr(r, hcScopeExprs(), broken == "scope")
		h.noScope = broken == "no-scope"
	}
	return h
}

func (h *hcHistory) custom() bool {
	return h.in == "struct" || h.in == "map" || h.in == "raw" || h.in == "rc-map"
}

func (h *hcHistory) describe() string {
	scope := h.scope.src
	if h.noScope {
		scope = "(none)"
	}
	return fmt.Sprintf("In=%s Out=%s Key=%q Fingerprint=%q Scope=%q", h.in, h.out, h.key.src, h.fp.src, scope)
}

func (h *hcHistory) violate(format string, args ...any) {
	if len(h.violations) < 10 {
		h.violations = append(h.violations, fmt.Sprintf(format, args...))
	}
}

// wantRefusal returns the refusals construction must give, as fragments
// of their messages; empty when it must accept.
func (h *hcHistory) wantRefusal() []string {
	var want []string
	switch h.in {
	case "alb", "websocket":
		want = append(want, "cannot be scoped")
	case "apigw", "sqs":
		want = append(want, "have an entry point of their own")
	case "rc-struct", "rc-embedded":
		want = append(want, "receives the requestContext")
	}
	if h.out == "chan" {
		want = append(want, "cannot be encoded as JSON")
	}
	for i, e := range []hcExpr{h.key, h.fp, h.scope} {
		if e.bad != "" && !(i == 2 && h.noScope) {
			want = append(want, e.bad)
		}
	}
	if h.custom() && h.noScope {
		want = append(want, "HandlerConfig.Scope is empty")
	}
	return want
}

// build constructs the guard and the handler, and checks that
// construction refuses exactly what wantRefusal says.
func (h *hcHistory) build() bool {
	clock := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	h.guard = dedupe.New(h.store, &dedupe.Config{Prefix: fmt.Sprint("handlers-", h.seed), Now: func() time.Time { return clock },
		Logger: slog.New(slog.NewJSONHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	cfg := hcConfig{Key: h.key.src, Fingerprint: h.fp.src, Retention: []time.Duration{0, 2 * time.Hour}[h.rng.IntN(2)]}
	if h.custom() && !h.noScope {
		cfg.Scope = h.scope.src
	}
	err := h.construct(cfg)
	want := h.wantRefusal()
	switch {
	case err == nil && len(want) > 0:
		h.violate("construction accepted, want a refusal containing one of %q", want)
	case err != nil && len(want) == 0:
		h.violate("construction refused with %q, want it accepted", err)
	case err != nil:
		named := false
		for _, w := range want {
			named = named || strings.Contains(err.Error(), w)
		}
		if !named {
			h.violate("construction refused with %q, want one of %q", err, want)
		}
		if !strings.HasPrefix(err.Error(), "dedupe: ") {
			h.violate("refusal %q does not start with \"dedupe: \"", err)
		}
		h.errs = append(h.errs, err.Error())
	}
	return err == nil && len(h.violations) == 0
}

// hcConfig is the drawn part of a HandlerConfig, whatever its Out.
type hcConfig struct {
	Key, Fingerprint, Scope string
	Retention               time.Duration
}

// construct builds the handler for the drawn types.
func (h *hcHistory) construct(cfg hcConfig) error {
	switch h.in {
	case "struct":
		return withOut[hcOrder](h, cfg)
	case "map", "rc-map":
		return withOut[map[string]any](h, cfg)
	case "raw":
		return withOut[json.RawMessage](h, cfg)
	case "eventbridge":
		return withOut[events.EventBridgeEvent](h, cfg)
	case "apigw":
		return withOut[events.APIGatewayV2HTTPRequest](h, cfg)
	case "sqs":
		return withOut[*events.SQSEvent](h, cfg)
	case "alb":
		return withOut[events.ALBTargetGroupRequest](h, cfg)
	case "websocket":
		return withOut[events.APIGatewayWebsocketProxyRequest](h, cfg)
	case "rc-struct":
		return withOut[hcHTTPStruct](h, cfg)
	default:
		return withOut[hcHTTPEmbedded](h, cfg)
	}
}

func withOut[In any](h *hcHistory, cfg hcConfig) error {
	switch h.out {
	case "receipt":
		return build[In](h, cfg, func(seen string, _ *hcRequest) hcReceipt { return hcReceipt{Seen: seen, Run: h.ranCount} })
	case "map":
		return build[In](h, cfg, func(seen string, _ *hcRequest) map[string]any {
			return map[string]any{"seen": seen, "big": int64(9007199254740993), "f": 0.1, "html": "<a&b>"}
		})
	case "any":
		return build[In](h, cfg, func(seen string, _ *hcRequest) any { return hcUnsorted{Zeta: 9007199254740993, Seen: seen} })
	case "holder":
		return build[In](h, cfg, func(seen string, _ *hcRequest) hcHolder { return hcHolder{V: hcUnsorted{Zeta: 1, Seen: seen}} })
	case "http":
		return build[In](h, cfg, func(seen string, r *hcRequest) events.APIGatewayV2HTTPResponse {
			return events.APIGatewayV2HTTPResponse{StatusCode: r.status, Body: seen, Headers: map[string]string{"Content-Type": "text/plain"}}
		})
	case "panicky":
		return build[In](h, cfg, func(seen string, r *hcRequest) hcPanicky { return hcPanicky{Seen: seen, Mode: r.mode} })
	default:
		return build[In](h, cfg, func(seen string, _ *hcRequest) hcChanOut { return hcChanOut{Seen: seen} })
	}
}

// build makes the handler and keeps a sender for it.
func build[In, Out any](h *hcHistory, cfg hcConfig, result func(seen string, r *hcRequest) Out) error {
	c := &dedupe.HandlerConfig[Out]{Key: cfg.Key, Fingerprint: cfg.Fingerprint, Scope: cfg.Scope, Retention: cfg.Retention,
		OnReplay: func(context.Context, *Out) { h.cur.hooked = true }}
	if keep, ok := any(func(r events.APIGatewayV2HTTPResponse) bool { return dedupe.DefaultKeep(r.StatusCode) }).(func(Out) bool); ok {
		c.Keep = keep // the HTTP adapters' rule: a 5xx, 408, 425 or 429 releases the key
	}
	fn, err := dedupe.Handler(h.guard, c, func(ctx context.Context, in In) (Out, error) {
		var zero Out
		h.cur.ran = true
		h.ranCount++
		seen := digest(canonical(mustJSON(in)))
		h.views[seen] = h.cur.view
		if h.cur.mode == "fail" {
			return zero, errors.New("downstream failed")
		}
		return result(seen, &h.cur), nil
	})
	if err != nil {
		return err
	}
	h.handler = hcSender[In, Out]{fn: fn}
	return nil
}

// hcSender sends one event through a built handler.
type hcSender[In, Out any] struct {
	fn func(context.Context, In) (Out, error)
}

// send decodes raw as the Lambda runtime does and calls the handler. It
// returns the result, its JSON, and the error.
func (s hcSender[In, Out]) send(raw []byte) ([]byte, any, error) {
	var in In
	if p, isRaw := any(&in).(*json.RawMessage); isRaw {
		*p = append(json.RawMessage{}, raw...)
	} else if err := json.Unmarshal(raw, &in); err != nil {
		panic(err) // decodeAsIn decoded it
	}
	o, err := s.fn(context.Background(), in)
	return encodeAsRuntime(o), o, err
}

// encodeAsRuntime returns the JSON the Lambda runtime would answer with,
// nil when it cannot encode the result.
func encodeAsRuntime(v any) (b []byte) {
	defer func() {
		if recover() != nil {
			b = nil
		}
	}()
	b, _ = json.Marshal(v)
	return b
}

// run sends the history's events: a few orders, each sent up to three
// times, some changed in one field before a send.
func (h *hcHistory) run() {
	bases := []map[string]any{h.newOrder(), h.newOrder()}
	if h.rng.IntN(2) == 0 {
		bases = append(bases, h.newOrder())
	}
	steps := 10 + h.rng.IntN(14)
	for range steps {
		i := h.rng.IntN(len(bases))
		ev := clone(bases[i]).(map[string]any)
		if h.rng.IntN(2) == 0 {
			h.perturb(ev)
			if h.rng.IntN(2) == 0 {
				bases[i] = ev
			}
		}
		for range 1 + h.rng.IntN(3) {
			h.send(ev)
		}
	}
}

// The values events are made of. Every string drawn into an event is a
// secret: no error or log line may quote it.
func (h *hcHistory) token(prefix string) string {
	s := fmt.Sprintf("%s%06d", prefix, h.rng.IntN(1000000))
	h.secrets[s] = true
	return s
}

func (h *hcHistory) idValue() (any, bool) {
	switch h.rng.IntN(10) {
	case 0:
		return json.Number("7"), true
	case 1:
		return json.Number("1234567890123456789"), true
	case 2:
		return json.Number("1234567890123456788"), true
	case 3:
		return "7", true
	case 4:
		return []any{"7"}, true
	case 5:
		return nil, true
	case 6:
		return nil, false // missing
	case 7:
		return json.Number("7.0"), true
	}
	return h.token("ord-"), true
}

func (h *hcHistory) number() (any, bool) {
	switch h.rng.IntN(7) {
	case 0:
		return json.Number("12.5"), true
	case 1:
		return json.Number("9007199254740993"), true
	case 2:
		return nil, true
	case 3:
		return nil, false
	case 4:
		return json.Number("0.10000000000000001"), true
	}
	return json.Number(fmt.Sprint(h.rng.IntN(3) * 1250)), true
}

func set(m map[string]any, k string, v any, ok bool) {
	if ok {
		m[k] = v
	} else {
		delete(m, k)
	}
}

func (h *hcHistory) newOrder() map[string]any {
	ev := map[string]any{
		"tenant":  []string{"t-a", "t-b"}[h.rng.IntN(2)],
		"account": []json.Number{"1234567890123456789", "1234567890123456788", "42"}[h.rng.IntN(3)],
		"email":   h.token("mail") + "@example.com",
	}
	h.secrets[ev["email"].(string)] = true
	id, ok := h.idValue()
	set(ev, "id", id, ok)
	if h.rng.IntN(8) != 0 {
		ev["detail"] = h.newDetail()
	}
	h.setNote(ev)
	return ev
}

// setNote sets the order's note: JSON text holding the order's ID, text
// that is not JSON, or nothing.
func (h *hcHistory) setNote(ev map[string]any) {
	switch h.rng.IntN(4) {
	case 0:
		delete(ev, "note")
	case 1:
		ev["note"] = "{" + h.token("x") + ": 1}" // not JSON
	default:
		ev["note"] = string(mustJSON(map[string]any{"ref": ev["id"]}))
	}
}

func (h *hcHistory) newDetail() map[string]any {
	d := map[string]any{"card": h.token("4111")}
	id, ok := h.idValue()
	set(d, "orderId", id, ok)
	n, ok := h.number()
	set(d, "amount", n, ok)
	switch h.rng.IntN(4) {
	case 0:
		d["currency"] = nil
	case 1:
	default:
		d["currency"] = []string{"EUR", "USD"}[h.rng.IntN(2)]
	}
	switch h.rng.IntN(4) {
	case 0:
	case 1:
		d["lines"] = []any{}
	default:
		var lines []any
		for range 1 + h.rng.IntN(3) {
			line := map[string]any{"sku": h.token("sku-")}
			p, ok := h.number()
			set(line, "price", p, ok)
			lines = append(lines, line)
		}
		d["lines"] = lines
	}
	return d
}

// perturb changes one field of an event.
func (h *hcHistory) perturb(ev map[string]any) {
	d, _ := ev["detail"].(map[string]any)
	switch h.rng.IntN(10) {
	case 0:
		id, ok := h.idValue()
		set(ev, "id", id, ok)
	case 1:
		ev["tenant"] = []string{"t-a", "t-b"}[h.rng.IntN(2)]
	case 2, 9:
		// Its neighbour: one float64 for both.
		if ev["account"] == json.Number("1234567890123456789") {
			ev["account"] = json.Number("1234567890123456788")
		} else {
			ev["account"] = json.Number("1234567890123456789")
		}
	case 3:
		ev["junk"] = h.token("junk-") // a member no type of In holds
		h.setNote(ev)
	case 4:
		ev["detail"] = h.newDetail()
	default:
		if d == nil {
			return
		}
		switch h.rng.IntN(3) {
		case 0:
			id, ok := h.idValue()
			set(d, "orderId", id, ok)
		case 1:
			n, ok := h.number()
			set(d, "amount", n, ok)
		default:
			set(d, "currency", nil, h.rng.IntN(2) == 0)
		}
	}
}

// raw returns the event's payload for the drawn In: the order itself,
// an EventBridge event whose detail is the order, or an API Gateway
// request whose body is.
func (h *hcHistory) raw(ev map[string]any) []byte {
	order := mustJSON(ev)
	switch h.in {
	case "eventbridge":
		id := "evt-1"
		if s, ok := ev["id"].(string); ok {
			id = s
		}
		return mustJSON(map[string]any{"version": "0", "id": id, "detail-type": "OrderPlaced",
			"source": "shop." + ev["tenant"].(string), "account": "123456789012", "region": "eu-west-1",
			"time": "2030-01-01T00:00:00Z", "resources": []any{}, "detail": json.RawMessage(order)})
	case "apigw":
		req := map[string]any{"version": "2.0", "routeKey": "POST /orders", "rawPath": "/orders",
			"headers": map[string]any{"content-type": "application/json"}, "body": string(order),
			"requestContext": map[string]any{"apiId": "api1", "stage": "prod", "http": map[string]any{"method": "POST", "path": "/orders"}}}
		if h.rng.IntN(10) != 0 {
			req["requestContext"].(map[string]any)["authorizer"] = map[string]any{"jwt": map[string]any{
				"claims": map[string]any{"iss": "https://idp", "sub": ev["tenant"]}}}
		}
		return mustJSON(req)
	case "rc-map":
		// An HTTP request in a map: the runtime keeps the member's name
		// as the payload spells it.
		ev = clone(ev).(map[string]any)
		ev[[]string{"requestContext", "RequestContext", "requestcontext"}[h.rng.IntN(3)]] = map[string]any{"apiId": "api1"}
		return mustJSON(ev)
	}
	return order
}

// viewOf computes the reference view of a decoded event, and the
// refusal the rules call for.
func (h *hcHistory) viewOf(tree any) (hcView, error) {
	var v hcView
	switch h.in {
	case "eventbridge":
		t := root(tree)
		v.scope = fmt.Sprint(get(t, "account").v, "|", get(t, "region").v, "|", get(t, "source").v, "|", get(t, "detail-type").v)
	case "apigw":
		sub, _ := get(root(tree), "requestContext", "authorizer", "jwt", "claims", "sub").v.(string)
		if sub == "" {
			return v, dedupe.ErrNoPrincipal
		}
		v.scope = "jwt:" + sub
	default:
		for k, x := range get(root(tree)).v.(map[string]any) {
			if x != nil && strings.EqualFold(k, "requestContext") {
				return v, dedupe.ErrNoPrincipal
			}
		}
		s, ok := refKey(h.scope.ref(tree))
		if !ok {
			return v, dedupe.ErrNoKey
		}
		v.scope = s
	}
	k, ok := refKey(h.key.ref(tree))
	if !ok {
		return v, dedupe.ErrNoKey
	}
	v.key = k
	if h.fp.src != "" {
		f, ok := refFingerprint(h.fp.ref(tree))
		if !ok {
			return v, dedupe.ErrNoFingerprint
		}
		v.fp = f
		return v, nil
	}
	switch h.in {
	case "eventbridge":
		v.fp = canonical(mustJSON(get(root(tree), "detail").v))
	case "apigw":
		body, _ := get(root(tree), "body").v.(string)
		v.fp = canonical([]byte(body))
	default:
		v.fp = canonical(mustJSON(tree))
	}
	return v, nil
}

// send sends one event and checks the answer against the model.
func (h *hcHistory) send(ev map[string]any) {
	raw := h.raw(ev)
	h.cur = hcRequest{mode: "ok", status: 201, describe: string(raw)}
	switch h.out {
	case "http":
		h.cur.status = []int{201, 201, 201, 200, 500, 503, 429, 408}[h.rng.IntN(8)]
	case "panicky":
		h.cur.mode = []string{"ok", "ok", "panic", "error"}[h.rng.IntN(4)]
	}
	if h.rng.IntN(10) == 0 {
		h.cur.mode = "fail"
	}
	tree, ok := h.decodeAsIn(raw)
	if !ok {
		return // the runtime fails before the handler
	}
	// The view is computed from what the handler will see, before it runs.
	h.cur.view, h.cur.refusal = h.viewOf(tree)
	var out []byte
	var outVal any
	var err error
	func() {
		defer func() {
			if r := recover(); r != nil {
				ok = false
				h.violate("%s: the handler panicked: %v", h.cur.describe, r)
			}
		}()
		out, outVal, err = h.handler.send(raw)
	}()
	if !ok {
		return
	}
	h.counts.requests++
	if err != nil {
		h.errs = append(h.errs, err.Error())
	}
	h.check(out, outVal, err)
}

// hcSend is what every hcSender does.
type hcSend interface {
	send(raw []byte) (out []byte, outVal any, err error)
}

// decodeAsIn returns the tree of the In the runtime would decode raw
// into, as the handler sees it.
func (h *hcHistory) decodeAsIn(raw []byte) (any, bool) {
	var v any
	var err error
	switch h.in {
	case "struct":
		var o hcOrder
		err, v = json.Unmarshal(raw, &o), o
	case "map", "rc-map":
		var m map[string]any
		err, v = json.Unmarshal(raw, &m), m
	case "raw":
		return decodeTree(raw), json.Valid(raw)
	case "eventbridge":
		var e events.EventBridgeEvent
		err, v = json.Unmarshal(raw, &e), e
	case "apigw":
		var r events.APIGatewayV2HTTPRequest
		err, v = json.Unmarshal(raw, &r), r
	}
	if err != nil {
		return nil, false
	}
	return decodeTree(mustJSON(v)), true
}

// check checks one answer against the model.
func (h *hcHistory) check(out []byte, outVal any, err error) {
	r := &h.cur
	problem := h.problem(outVal)
	refusedAs := refusal(err, problem)
	id := r.view.scope + "\x00" + r.view.key
	if r.refusal != nil {
		h.counts.refused++
		if r.ran {
			h.violate("%s: the handler ran, want the event refused (%v)", r.describe, r.refusal)
		}
		if refusedAs == nil || (!errors.Is(refusedAs, r.refusal) && !(r.refusal == dedupe.ErrNoFingerprint && errors.Is(refusedAs, dedupe.ErrNoKey))) {
			h.violate("%s: got %s %v, want refused with %v", r.describe, out, err, r.refusal)
		}
		return
	}
	if refusedAs != nil {
		h.violate("%s: refused (%v %+v) although its key %s, scope %s and fingerprint are usable", r.describe, err, problem, r.view.key, r.view.scope)
		return
	}
	st := h.states[id]
	if st == nil {
		st = &hcIdentity{}
		h.states[id] = st
	}
	if r.hooked != (!r.ran && err == nil && r.refusal == nil && refusedAs == nil) {
		h.violate("%s: OnReplay called %v, want it called exactly for a replay (ran %v, err %v)", r.describe, r.hooked, r.ran, err)
	}
	if r.ran {
		h.counts.runs++
		switch {
		case st.recorded:
			h.violate("%s: the handler ran again for a key whose run is recorded", r.describe)
		case st.claimed && st.fp != r.view.fp:
			h.violate("%s: ran a request whose fingerprint differs from its key's first, want ErrFingerprintMismatch", r.describe)
		}
		if !st.claimed {
			st.claimed, st.fp = true, r.view.fp
		}
		switch {
		case r.mode == "fail":
			if err == nil || err.Error() != "downstream failed" {
				h.violate("%s: the handler failed, got %v, want its error", r.describe, err)
			}
		case h.out == "http" && !dedupe.DefaultKeep(r.status):
			// released: a retry runs again
		case h.out == "panicky" && r.mode != "ok":
			if !errors.Is(err, dedupe.ErrResultUnencodable) {
				h.violate("%s: a result that fails to encode (%s) returned %v, want ErrResultUnencodable", r.describe, r.mode, err)
			}
			st.recorded, st.omitted = true, true
		case h.out == "holder":
			if err != nil {
				h.violate("%s: %v", r.describe, err)
			}
			st.recorded, st.omitted = true, true
		default:
			if err != nil {
				h.violate("%s: ran, got %v", r.describe, err)
			}
			st.recorded, st.answer = true, out
		}
		return
	}
	kind := ""
	if problem != nil {
		kind = problem.Type
	}
	switch {
	case errors.Is(err, dedupe.ErrFingerprintMismatch) || kind == dedupe.ProblemKeyReused:
		h.counts.conflicts++
		if !st.claimed || st.fp == r.view.fp {
			h.violate("%s: ErrFingerprintMismatch for a request whose fingerprint is its key's first (claimed %v)", r.describe, st.claimed)
		}
	case errors.Is(err, dedupe.ErrResultOmitted) || kind == dedupe.ProblemResultUnavailable:
		h.counts.omitted++
		if !st.omitted {
			h.violate("%s: ErrResultOmitted, but no run of this key was recorded without its result (recorded %v)", r.describe, st.recorded)
		}
	case err != nil || problem != nil:
		h.violate("%s: unexpected %v %+v", r.describe, err, problem)
	default:
		// A replay: the answer of a run of the same request, byte for byte.
		h.counts.replays++
		seen := seenIn(out)
		runView, known := h.views[seen]
		switch {
		case !known:
			h.violate("%s: answered %s, which no run produced", r.describe, out)
		case runView != r.view:
			h.violate("%s: answered with the answer of another request:\n  this: %+v\n  that: %+v", r.describe, r.view, runView)
		case !st.recorded || st.omitted:
			h.violate("%s: replayed %s although no run of its key is recorded with its result", r.describe, out)
		case !bytes.Equal(out, st.answer):
			h.violate("%s: replay %s differs from the first answer %s", r.describe, out, st.answer)
		}
		if h.out == "http" {
			var resp events.APIGatewayV2HTTPResponse
			json.Unmarshal(out, &resp)
			if !dedupe.DefaultKeep(resp.StatusCode) {
				h.violate("%s: replayed a %d", r.describe, resp.StatusCode)
			}
		}
	}
}

// problem returns the problem document of an HTTP result, if it is one.
func (h *hcHistory) problem(out any) *dedupe.Problem {
	resp, ok := out.(events.APIGatewayV2HTTPResponse)
	if !ok || resp.Headers["Content-Type"] != dedupe.ProblemContentType {
		return nil
	}
	h.errs = append(h.errs, resp.Body)
	var p dedupe.Problem
	if json.Unmarshal([]byte(resp.Body), &p) != nil {
		return &dedupe.Problem{Type: "unparsable"}
	}
	return &p
}

// refusal returns the refusal an answer is, as an error: the error
// itself, or the sentinel a problem response stands for.
func refusal(err error, p *dedupe.Problem) error {
	switch {
	case errors.Is(err, dedupe.ErrNoKey), errors.Is(err, dedupe.ErrNoFingerprint), errors.Is(err, dedupe.ErrNoPrincipal):
		return err
	case p != nil && p.Type == dedupe.ProblemInternal:
		return fmt.Errorf("problem %s: %w", p.Type, dedupe.ErrNoPrincipal)
	}
	return nil
}

// checkLeaks checks that no secret of the history's events appears in
// an error, a problem response or a log line.
func (h *hcHistory) checkLeaks() {
	logs := h.logs.String()
	for _, e := range append(h.errs, logs) {
		if i := strings.Index(e, "invalid character '"); i >= 0 {
			h.violate("encoding/json's error quotes a character of the event: %s", e[i:min(len(e), i+40)])
		}
	}
	for s := range h.secrets {
		if strings.Contains(logs, s) {
			h.violate("a log line quotes the event value %q:\n%s", s, firstLine(logs, s))
		}
		for _, e := range h.errs {
			if strings.Contains(e, s) {
				h.violate("an error quotes the event value %q: %s", s, e)
			}
		}
	}
}

func firstLine(text, s string) string {
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, s) {
			return l
		}
	}
	return ""
}

// seenIn returns the digest of what the run saw, from a result's JSON.
func seenIn(out []byte) string {
	var m map[string]any
	if json.Unmarshal(out, &m) != nil {
		return ""
	}
	for _, k := range []string{"seen", "body"} {
		if s, ok := m[k].(string); ok {
			return s
		}
	}
	if v, ok := m["v"].(map[string]any); ok {
		s, _ := v["seen"].(string)
		return s
	}
	return ""
}

func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "seen-" + hex.EncodeToString(sum[:8])
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func clone(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, y := range x {
			m[k] = clone(y)
		}
		return m
	case []any:
		l := make([]any, len(x))
		for i, y := range x {
			l[i] = clone(y)
		}
		return l
	}
	return v
}

// syncBuffer is a log destination.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// The types CheckHandlers draws.
type (
	// hcOrder is an event type of the user's: what it does not name, the
	// handler does not see.
	hcOrder struct {
		Tenant  string    `json:"tenant"`
		ID      any       `json:"id,omitempty"`
		Account int64     `json:"account"`
		Email   string    `json:"email"`
		Note    *string   `json:"note,omitempty"`
		Detail  *hcDetail `json:"detail,omitempty"`
	}
	hcDetail struct {
		OrderID  any         `json:"orderId,omitempty"`
		Amount   json.Number `json:"amount,omitempty"`
		Currency *string     `json:"currency"`
		Lines    []hcLine    `json:"lines,omitempty"`
		Card     string      `json:"card"`
	}
	hcLine struct {
		SKU   string      `json:"sku"`
		Price json.Number `json:"price,omitempty"`
	}

	// hcHTTPStruct and hcHTTPEmbedded would receive an HTTP request's
	// requestContext: encoding/json matches names case-insensitively.
	hcHTTPStruct struct {
		RequestContext map[string]any
		Body           string
	}
	hcHTTPEmbedded struct {
		hcHTTPStruct
		Extra string `json:"extra"`
	}

	hcReceipt struct {
		Seen string `json:"seen"`
		Run  int    `json:"run"`
	}
	// hcUnsorted encodes its members out of key order.
	hcUnsorted struct {
		Zeta int64  `json:"zeta"`
		Seen string `json:"seen"`
	}
	// hcHolder holds a struct in an interface: it decodes back as a map.
	hcHolder struct {
		V any `json:"v"`
	}
	// hcPanicky fails to encode, or panics, as Mode says.
	hcPanicky struct {
		Seen string `json:"seen"`
		Mode string `json:"mode"`
	}
	// hcChanOut can never be encoded.
	hcChanOut struct {
		Seen string `json:"seen"`
		Done chan struct{}
	}
)

func (p hcPanicky) MarshalJSON() ([]byte, error) {
	switch p.Mode {
	case "panic":
		var m map[string]int
		m[p.Seen]++
	case "error":
		return nil, errors.New("cannot encode " + p.Seen)
	}
	type plain hcPanicky
	return json.Marshal(plain(p))
}

func (p *hcPanicky) UnmarshalJSON(b []byte) error {
	type plain hcPanicky
	return json.Unmarshal(b, (*plain)(p))
}
