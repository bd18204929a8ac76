package dedupetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
)

// Fault is what an Injector makes of one backend call.
type Fault int

// The faults a checker injects.
const (
	// FaultNone lets the call through.
	FaultNone Fault = iota
	// FaultLostReply applies the call on the server, then loses its
	// reply: the client sees a transient error (a reset connection) and,
	// like every SDK, may send the call again.
	FaultLostReply
	// FaultThrottle refuses the call before it is applied, transiently.
	FaultThrottle
	// FaultTimeout gives up on the call before it is applied, as a
	// timeout does.
	FaultTimeout
	// FaultDenied refuses the call for good (S3's AccessDenied: a bucket
	// or prefix the role may not use, a bucket that does not exist).
	FaultDenied
	// FaultMissing answers a read as if its object did not exist (S3's
	// NoSuchKey): the object is deleted, then read.
	FaultMissing
	// FaultCut answers a read, then cuts its transfer halfway
	// (io.ErrUnexpectedEOF while the body is read).
	FaultCut
	// FaultConflict refuses a write before it is applied because another
	// Region writes the same item (DynamoDB's
	// ReplicatedWriteConflictException on an MRSC global table).
	FaultConflict
)

// String returns the fault's name.
func (f Fault) String() string {
	switch f {
	case FaultLostReply:
		return "lost-reply"
	case FaultThrottle:
		return "throttle"
	case FaultTimeout:
		return "timeout"
	case FaultDenied:
		return "denied"
	case FaultMissing:
		return "missing"
	case FaultCut:
		return "cut"
	case FaultConflict:
		return "conflict"
	}
	return "none"
}

// Injector decides the fault of one backend call; op names the call (a
// DynamoDB operation, a Store method). It must be safe for concurrent use.
type Injector func(op string) Fault

// CheckConfig configures Check.
type CheckConfig struct {
	// NewStore returns the store under test for one history. Every call
	// it makes to its backend must ask inject what to do, at the layer
	// where real faults happen (an SDK middleware or HTTP transport, a
	// driver wrapper), so that the client's own retries are exercised.
	// FaultyStore does this for a store without such a layer. Calls
	// NewStore itself makes are never faulted.
	NewStore func(t *testing.T, inject Injector) dedupe.Store

	// Histories is the number of random histories. Zero means the value
	// of DEDUPE_CHECK_HISTORIES, else 25.
	Histories int

	// Seed seeds the first history; history i uses Seed+i. Zero means the
	// value of DEDUPE_CHECK_SEED, else a random seed. The seed is printed,
	// and a failure names the seed that replays it.
	Seed uint64
}

// Check runs a randomized, model-based test of the whole path, adapter
// (dedupe.HTTPAPI) → guard → store, against the stores cfg.NewStore makes.
//
// Each history sends concurrent and retried payments over a few keys,
// callers, routes and stages, through guards on "hosts" whose clocks are
// up to 500 ms apart, with handlers that succeed, decline (a stored 402),
// fail, panic, answer 500, run long or past their lease, or die after
// their side effect (nothing recorded or released), while the injector
// loses replies after writes were applied, throttles and times out about
// one backend call in seven. After each history Check verifies:
//
//  1. at most once: an execution of a (scope, key) never starts while an
//     earlier one holds an unexpired lease (unless that one failed and
//     ended), nor after one completed;
//  2. every replay equals, byte for byte, the response of the execution
//     it replays;
//  3. no response crossed a scope: each answer carries its own caller's,
//     stage's, route's and key's execution;
//  4. no owner is answered 409 for its own claim: every 409 has another
//     request of its scope that may hold the key (but one the store
//     answered from a writer it saw and could not read, or from its own
//     takeover write that failed without an answer: either may be the
//     request's own claim, applied before its reply was lost, as a 503
//     may);
//  5. nothing is left IN_PROGRESS with a lease the reaper would not see
//     run out: every in-flight record's lease ends within the longest
//     lease the guard takes, before the record expires;
//  6. one key, one request: a request with a different body never runs
//     under a key whose first request ran and did not fail, even after
//     that one's lease ran out.
//
// Run it for longer with DEDUPE_CHECK_HISTORIES=2000, and replay a failure
// with DEDUPE_CHECK_SEED=<seed> DEDUPE_CHECK_HISTORIES=1.
func Check(t *testing.T, cfg CheckConfig) {
	t.Helper()
	n, seed := runs(cfg.Histories, cfg.Seed, "DEDUPE_CHECK", 25)
	t.Logf("dedupetest.Check: seed %d, %d histories (replay one with DEDUPE_CHECK_SEED=<seed> DEDUPE_CHECK_HISTORIES=1)", seed, n)
	for i := range n {
		s := seed + uint64(i)
		ok := t.Run(fmt.Sprintf("seed=%d", s), func(t *testing.T) {
			h := newHistory(t, s, cfg.NewStore)
			h.run()
			h.verify()
		})
		if !ok {
			t.Logf("replay with DEDUPE_CHECK_SEED=%d DEDUPE_CHECK_HISTORIES=1", s)
			return
		}
	}
}

// runs resolves a randomized checker's history count and seed: the
// configured ones, else $PREFIX_HISTORIES (else def) and $PREFIX_SEED
// (else a random seed).
func runs(histories int, seed uint64, prefix string, def int) (int, uint64) {
	if histories == 0 {
		histories = envInt(prefix+"_HISTORIES", def)
	}
	if seed == 0 {
		seed = uint64(envInt(prefix+"_SEED", 0))
	}
	if seed == 0 {
		seed = rand.Uint64() >> 1
	}
	return histories, seed
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// The shape of a history.
const (
	rounds       = 14
	maxParallel  = 4
	checkLease   = 10 * time.Second // deadline of each invocation
	checkMargin  = dedupe.DefaultLeaseMargin
	maxSkew      = 500 * time.Millisecond
	slowHandler  = 20 * time.Second // a handler that outlives its lease
	longHandler  = 8 * time.Second  // a handler that ends within it
	faultPercent = 14
)

// vocabulary is what a history's requests are drawn from: few enough
// callers, stages, routes and keys that requests collide often.
type vocabulary struct {
	callers, stages, routes, keys, bodies, kinds []string
}

func newVocabulary() vocabulary {
	return vocabulary{
		callers: []string{"alice", "bob"},
		stages:  []string{"dev", "prod"},
		routes:  []string{"/payments", "/refunds"},
		keys:    []string{"k1", "k2"},
		bodies:  []string{`{"amount":1}`, `{"amount":2}`},
		kinds:   []string{"ok", "ok", "ok", "declined", "error", "panic", "5xx", "slow", "long", "crash"},
	}
}

// intent is what one request asks for.
type intent struct {
	caller, stage, route, key, body, kind string
}

// scope names the (scope, key) an intent's answers belong to.
func (in intent) scope() string {
	return in.caller + "|" + in.stage + "|" + in.route + "|" + in.key
}

// execution is one run of the handler.
type execution struct {
	id                int
	scope             string
	kind              string
	body              string // the request's
	respBody          string
	startSeq, endSeq  int64
	start, roundStart time.Time
	status            int
	headers           map[string]string
	storedSeq         int64 // seq of the first sign it was stored; 0: none
}

// answer is what one request got.
type answer struct {
	in         intent
	startSeq   int64 // when it was sent
	sentAt     time.Time
	seq        int64 // when it was answered
	at         time.Time
	roundStart time.Time
	status     int
	replayed   bool
	problem    string
	headers    map[string]string
	body       string
	panicked   bool
	crashed    bool // the invocation died: nobody received the answer
	evidence   bool // a claim of it met a writer whose record the store could not read
	err        error
}

// history is one random run and everything observed in it.
type history struct {
	t      *testing.T
	rng    *rand.Rand // the history's shape: run's goroutine only
	frng   *rand.Rand // faults: any goroutine, under rngMu
	seed   uint64
	clock  atomic.Int64 // sim time, ns
	seq    atomic.Int64
	quiet  atomic.Bool // faults off (construction, verification)
	store  dedupe.Store
	hosts  []func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error)
	faults atomic.Int64

	mu      sync.Mutex
	rngMu   sync.Mutex // guards frng
	execs   []*execution
	answers []answer
	claimed map[string]bool // store keys claimed
}

func newHistory(t *testing.T, seed uint64, newStore func(*testing.T, Injector) dedupe.Store) *history {
	h := &history{t: t, seed: seed, claimed: map[string]bool{},
		rng:  rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		frng: rand.New(rand.NewPCG(seed^0x5851f42d4c957f2d, seed))}
	h.clock.Store(base.UnixNano())
	// Construction is not under test: a store's New may call its backend
	// (dynamostore's DescribeTable), and a fault there fails New loudly,
	// which the stores' own tests cover. Faults start with the history.
	h.quiet.Store(true)
	inner := newStore(t, h.inject)
	h.quiet.Store(false)
	h.store = &observer{Store: inner, h: h}
	prefix := "check-" + strconv.FormatUint(seed, 36) + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	for range 3 {
		skew := time.Duration(h.rng.Int64N(int64(2*maxSkew))) - maxSkew
		g := dedupe.New(h.store, &dedupe.Config{
			Prefix: prefix,
			Now:    func() time.Time { return time.Unix(0, h.clock.Load()).Add(skew) },
		})
		h.hosts = append(h.hosts, dedupe.HTTPAPI(g, nil, h.handler))
	}
	return h
}

// inject draws a fault for one backend call.
func (h *history) inject(op string) Fault {
	if h.quiet.Load() {
		return FaultNone
	}
	h.rngMu.Lock()
	defer h.rngMu.Unlock()
	if h.frng.IntN(100) >= faultPercent {
		return FaultNone
	}
	h.faults.Add(1)
	return Fault(1 + h.frng.IntN(3))
}

func (h *history) now() time.Time { return time.Unix(0, h.clock.Load()) }

func (h *history) pick(list []string) string { return list[h.rng.IntN(len(list))] }

// run plays the history: rounds of concurrent requests, a third of them
// retries of an earlier request, with the clock moving between rounds.
func (h *history) run() {
	v := newVocabulary()
	var sent []intent
	for range rounds {
		n := 1 + h.rng.IntN(maxParallel)
		batch := make([]intent, n)
		for i := range batch {
			if len(sent) > 0 && h.rng.IntN(3) == 0 {
				batch[i] = sent[h.rng.IntN(len(sent))] // a client's retry
				if h.rng.IntN(2) == 0 {
					batch[i].kind = "ok" // the retry's own outcome
				}
				if h.rng.IntN(4) == 0 {
					batch[i].body = h.pick(v.bodies) // a key reused, perhaps for another request
				}
			} else {
				batch[i] = intent{
					caller: h.pick(v.callers), stage: h.pick(v.stages), route: h.pick(v.routes),
					key: h.pick(v.keys), body: h.pick(v.bodies), kind: h.pick(v.kinds),
				}
			}
		}
		if h.rng.IntN(4) == 0 { // a burst of concurrent duplicates
			for i := range batch {
				batch[i] = batch[0]
			}
		}
		sent = append(sent, batch...)
		roundStart := h.now()
		var wg sync.WaitGroup
		for _, in := range batch {
			host := h.hosts[h.rng.IntN(len(h.hosts))]
			wg.Add(1)
			go func() {
				defer wg.Done()
				h.send(host, in, roundStart)
			}()
		}
		wg.Wait()
		gap := time.Duration(h.rng.IntN(3000)) * time.Millisecond
		if h.rng.IntN(5) == 0 {
			gap += 15 * time.Second // long enough for leases to run out
		}
		h.clock.Add(int64(gap))
	}
}

// send makes one request and records its answer.
func (h *history) send(host func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error), in intent, roundStart time.Time) {
	ev := events.APIGatewayV2HTTPRequest{
		RouteKey: "POST " + in.route,
		RawPath:  in.route,
		Headers:  map[string]string{"idempotency-key": in.key, "x-check-kind": in.kind},
		Body:     in.body,
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			APIID: "checkapi", Stage: in.stage, RouteKey: "POST " + in.route,
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "POST", Path: in.route},
			Authorizer: &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
				JWT: &events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription{
					Claims: map[string]string{"iss": "https://issuer.example", "sub": in.caller},
				},
			},
		},
	}
	crashed, evidence := new(atomic.Bool), new(atomic.Bool)
	ctx := context.WithValue(context.WithValue(context.Background(), roundKey{}, roundStart), crashKey{}, crashed)
	ctx = context.WithValue(ctx, evidenceKey{}, evidence)
	ctx, cancel := context.WithDeadline(ctx, h.now().Add(checkLease))
	defer cancel()
	a := answer{in: in, roundStart: roundStart, startSeq: h.seq.Add(1), sentAt: h.now()}
	func() {
		defer func() {
			if r := recover(); r != nil {
				a.panicked = true
			}
		}()
		resp, err := host(ctx, ev)
		a.status, a.headers, a.body, a.err = resp.StatusCode, resp.Headers, resp.Body, err
	}()
	a.seq, a.at = h.seq.Add(1), h.now()
	a.crashed = crashed.Load()
	a.evidence = evidence.Load()
	a.replayed = a.headers[dedupe.HeaderReplayed] == "true"
	if strings.HasPrefix(a.headers["Content-Type"], dedupe.ProblemContentType) {
		var p dedupe.Problem
		json.Unmarshal([]byte(a.body), &p)
		a.problem = p.Type
	}
	h.mu.Lock()
	h.answers = append(h.answers, a)
	if a.replayed {
		if id, ok := execID(a.body); ok && id < len(h.execs) && h.execs[id].storedSeq == 0 {
			h.execs[id].storedSeq = a.seq
		}
	}
	h.mu.Unlock()
}

// handler is the guarded work: it records the execution and answers with
// a body that names it and the scope it ran for.
func (h *history) handler(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	in := intent{
		caller: ev.RequestContext.Authorizer.JWT.Claims["sub"], stage: ev.RequestContext.Stage,
		route: ev.RawPath, key: ev.Headers["idempotency-key"], kind: ev.Headers["x-check-kind"],
	}
	roundStart, _ := ctx.Value(roundKey{}).(time.Time)
	e := &execution{scope: in.scope(), kind: in.kind, body: ev.Body, start: h.now(), roundStart: roundStart, startSeq: h.seq.Add(1)}
	h.mu.Lock()
	e.id = len(h.execs)
	h.execs = append(h.execs, e)
	h.mu.Unlock()
	defer func() { e.endSeq = h.seq.Add(1) }()

	body := fmt.Sprintf(`{"exec":%d,"scope":%q}`, e.id, e.scope)
	resp := events.APIGatewayV2HTTPResponse{StatusCode: 201, Headers: map[string]string{"Content-Type": "application/json", "X-Exec": strconv.Itoa(e.id)}, Body: body}
	switch in.kind {
	case "declined":
		resp.StatusCode = 402
	case "error":
		return events.APIGatewayV2HTTPResponse{}, fmt.Errorf("processor error")
	case "panic":
		panic("handler panic")
	case "5xx":
		resp.StatusCode = 502
	case "slow":
		h.clock.Add(int64(slowHandler))
	case "long":
		h.clock.Add(int64(longHandler))
	case "crash":
		// The side effect happened, then the invocation died: the guard
		// never records or releases anything (observer drops its calls).
		if c, ok := ctx.Value(crashKey{}).(*atomic.Bool); ok {
			c.Store(true)
		}
	}
	e.status, e.headers, e.respBody = resp.StatusCode, resp.Headers, resp.Body
	return resp, nil
}

// roundKey carries the sim time a request's round started to its handler.
type roundKey struct{}

// crashKey carries a request's *atomic.Bool, set when its invocation
// "dies" after the handler's side effect.
type crashKey struct{}

// evidenceKey carries a request's *atomic.Bool, set when a claim of it
// returned an error wrapping dedupe.ErrInProgress without a record of a
// live holder: the store met another writer it could not read (a failed
// condition, then a failed read), or its write taking over a free record
// failed without an answer (applied or not: the holder may be the
// request's own claim).
type evidenceKey struct{}

// crashed reports whether ctx belongs to an invocation that died.
func crashed(ctx context.Context) bool {
	c, ok := ctx.Value(crashKey{}).(*atomic.Bool)
	return ok && c.Load()
}

// execID reads the execution id from a handler's body.
func execID(body string) (int, bool) {
	var b struct {
		Exec *int `json:"exec"`
	}
	if json.Unmarshal([]byte(body), &b) != nil || b.Exec == nil {
		return 0, false
	}
	return *b.Exec, true
}

// kept reports whether an execution's outcome is stored (DefaultKeep).
func (e *execution) kept() bool { return e.status == 201 || e.status == 402 }

// leaseCertainlyAlive reports whether e's lease had certainly not run out
// at sim time at, for any skew: its claim came no earlier than its round
// started, and the lease is the deadline plus the margin.
func (e *execution) leaseCertainlyAlive(at time.Time) bool {
	return at.Before(e.roundStart.Add(checkLease + checkMargin - 2*maxSkew))
}

// leasePossiblyAlive is the other bound: its claim came no later than it
// started.
func leasePossiblyAlive(claimedBy, at time.Time) bool {
	return !at.After(claimedBy.Add(checkLease + checkMargin + 2*maxSkew))
}

// verify checks the history's invariants.
func (h *history) verify() {
	t := h.t
	h.quiet.Store(true)
	fail := func(format string, args ...any) {
		t.Helper()
		t.Errorf("seed %d: "+format, append([]any{h.seed}, args...)...)
	}

	// 1. At most once per lease epoch, never after completion.
	for i, e1 := range h.execs {
		for _, e2 := range h.execs[i+1:] {
			if e1.scope != e2.scope || e2.startSeq < e1.startSeq {
				continue
			}
			switch {
			case e1.storedSeq != 0 && e2.startSeq > e1.storedSeq:
				fail("exec %d of %s ran after exec %d completed\n%s", e2.id, e2.scope, e1.id, h.dump(e2.scope))
			case e1.leaseCertainlyAlive(e2.start) && (e1.kept() || e1.endSeq == 0 || e2.startSeq < e1.endSeq):
				fail("exec %d of %s ran while exec %d held the lease (kind %s)\n%s", e2.id, e2.scope, e1.id, e1.kind, h.dump(e2.scope))
			case e2.body != e1.body && (e1.kept() || e1.kind == "slow" || e2.startSeq < e1.endSeq):
				// 6. Only the same request takes a key over: a different
				// one may run only after the first failed and let go.
				fail("exec %d of %s ran a different request under the key of exec %d\n%s", e2.id, e2.scope, e1.id, h.dump(e2.scope))
			}
		}
	}

	for _, a := range h.answers {
		if a.panicked || a.crashed || a.err != nil {
			continue
		}
		id, isExec := execID(a.body)
		// 3. No response crossed a scope.
		if isExec {
			if id >= len(h.execs) || h.execs[id].scope != a.in.scope() {
				fail("request of %s answered with exec %d's response", a.in.scope(), id)
				continue
			}
		}
		// 2. Replays are byte-exact.
		if a.replayed {
			if !isExec {
				fail("replay to %s is not a handler's response: %q", a.in.scope(), a.body)
				continue
			}
			e := h.execs[id]
			if a.status != e.status || a.body != e.respBody || a.headers["Content-Type"] != e.headers["Content-Type"] || a.headers["X-Exec"] != e.headers["X-Exec"] || len(a.headers) != len(e.headers)+1 {
				fail("replay of exec %d = %d %v %q, want %d %v %q", id, a.status, a.headers, a.body, e.status, e.headers, e.respBody)
			}
		}
		// 4. A 409 in progress needs another holder. One answered from
		// a writer the store saw but could not read is exempt: like the
		// 503 it would otherwise be, its holder may be its own claim,
		// applied before a reply was lost.
		if a.status == 409 && a.problem == dedupe.ProblemInProgress && !a.evidence && !h.heldBySomeoneElse(a) {
			fail("request seq %d of %s answered 409 with no other request holding the key (its own claim?)\n%s", a.seq, a.in.scope(), h.dump(a.in.scope()))
		}
	}

	// 5. Nothing is stranded beyond what the reaper clears.
	now := h.now().Add(time.Minute)
	for key := range h.claimed {
		rec, err := h.store.Get(context.Background(), key, now)
		if err != nil {
			continue
		}
		if rec.Status == dedupe.StatusInProgress {
			if lease := rec.LeaseExpiresAt.Sub(rec.CreatedAt); lease > checkLease+checkMargin+time.Second {
				fail("in-flight record %s has a %v lease, longer than any invocation's", dedupe.KeyRef(key), lease)
			}
			if !rec.ExpiresAt.After(rec.LeaseExpiresAt) {
				fail("in-flight record %s expires before its lease ends", dedupe.KeyRef(key))
			}
		}
	}
	t.Logf("%d requests, %d executions, %d faults injected", len(h.answers), len(h.execs), h.faults.Load())
}

// dump describes what happened to one scope, for failure messages.
func (h *history) dump(scope string) string {
	var b strings.Builder
	for _, a := range h.answers {
		if a.in.scope() == scope {
			fmt.Fprintf(&b, "  answer seq %d at +%v round +%v: %s %s -> %d %s replayed=%v panic=%v evidence=%v err=%v %s\n", a.seq, a.at.Sub(base), a.roundStart.Sub(base), a.in.kind, a.in.body, a.status, a.problem, a.replayed, a.panicked, a.evidence, a.err, a.body)
		}
	}
	for _, e := range h.execs {
		if e.scope == scope {
			fmt.Fprintf(&b, "  exec %d seq %d..%d at +%v round +%v: %s %s -> %d stored@%d\n", e.id, e.startSeq, e.endSeq, e.start.Sub(base), e.roundStart.Sub(base), e.kind, e.body, e.status, e.storedSeq)
		}
	}
	return b.String()
}

// heldBySomeoneElse reports whether, while a was in flight, another
// request of its scope may have held the key: an execution whose lease may
// still have been running and that was not completed before a was sent,
// or a request answered 503 (its claim may have been applied before its
// store failed).
func (h *history) heldBySomeoneElse(a answer) bool {
	for _, e := range h.execs {
		if e.scope == a.in.scope() && e.startSeq < a.seq && leasePossiblyAlive(e.start, a.sentAt) &&
			(e.storedSeq == 0 || e.storedSeq > a.startSeq) {
			return true
		}
	}
	for _, b := range h.answers {
		// An earlier 503, or a 409 exempt by evidence (4. below), may
		// have left its own claim applied behind a lost reply: that
		// claim holds the key until its lease ends.
		if b.in.scope() == a.in.scope() && b.seq < a.seq && (b.status == 503 || b.evidence) && leasePossiblyAlive(b.at, a.sentAt) {
			return true
		}
	}
	// Requests still in flight when a was answered have no answer yet:
	// their claims count too, and so does that of one answered 409 on
	// evidence (its claim may have been applied behind a lost reply).
	for _, b := range h.answers {
		if b.in.scope() == a.in.scope() && b.seq > a.seq && !b.roundStart.After(a.at) && b.roundStart.Equal(a.roundStart) && (b.status != 409 || b.evidence) {
			return true
		}
	}
	return false
}

// observer sits between the guards and the store under test: it records
// the keys claimed and the completions that succeeded.
type observer struct {
	dedupe.Store
	h *history
}

// Claim implements dedupe.Store.
func (o *observer) Claim(ctx context.Context, req dedupe.ClaimRequest) (dedupe.ClaimResult, error) {
	o.h.mu.Lock()
	o.h.claimed[req.Key] = true
	o.h.mu.Unlock()
	res, err := o.Store.Claim(ctx, req)
	if e, ok := ctx.Value(evidenceKey{}).(*atomic.Bool); ok && errors.Is(err, dedupe.ErrInProgress) &&
		(res.Record.Token == "" || res.Record.FreeFor(req.Now, req.Fingerprint, req.Token)) {
		e.Store(true)
	}
	return res, err
}

// Complete implements dedupe.Store.
func (o *observer) Complete(ctx context.Context, req dedupe.CompleteRequest) error {
	if crashed(ctx) {
		return fmt.Errorf("observer: invocation died: %w", dedupe.ErrStoreUnavailable)
	}
	err := o.Store.Complete(ctx, req)
	if err == nil {
		if id, ok := execID(string(req.Result.Body)); ok {
			seq := o.h.seq.Add(1)
			o.h.mu.Lock()
			if id < len(o.h.execs) && o.h.execs[id].storedSeq == 0 {
				o.h.execs[id].storedSeq = seq
			}
			o.h.mu.Unlock()
		}
	}
	return err
}

// Release implements dedupe.Store.
func (o *observer) Release(ctx context.Context, key, token string) error {
	if crashed(ctx) {
		return fmt.Errorf("observer: invocation died: %w", dedupe.ErrStoreUnavailable)
	}
	return o.Store.Release(ctx, key, token)
}

// FaultyStore wraps a store that has no client layer of its own (such as
// memstore) so that Check can inject faults into it. It plays the part of
// an SDK: each call makes up to three attempts, each of which asks inject
// for a fault. A lost reply applies the call and then fails the attempt;
// a throttle or a timeout fails it unapplied. When every attempt failed,
// the call returns an error wrapping dedupe.ErrStoreUnavailable, as an SDK
// does after its retries.
type FaultyStore struct {
	// Store is the store the attempts reach.
	Store dedupe.Store
	// Inject decides each attempt's fault.
	Inject Injector
}

var _ dedupe.Store = (*FaultyStore)(nil)

// attempt runs op up to three times under injected faults.
func (f *FaultyStore) attempt(name string, op func() error) error {
	var last Fault
	for range 3 {
		last = f.Inject(name)
		switch last {
		case FaultNone:
			return op()
		case FaultLostReply:
			op()
		}
	}
	return fmt.Errorf("faultystore: %s: %s after 3 attempts: %w", name, last, dedupe.ErrStoreUnavailable)
}

// Claim implements dedupe.Store.
func (f *FaultyStore) Claim(ctx context.Context, req dedupe.ClaimRequest) (res dedupe.ClaimResult, err error) {
	err = f.attempt("Claim", func() error {
		var e error
		res, e = f.Store.Claim(ctx, req)
		return e
	})
	return res, err
}

// Complete implements dedupe.Store.
func (f *FaultyStore) Complete(ctx context.Context, req dedupe.CompleteRequest) error {
	return f.attempt("Complete", func() error { return f.Store.Complete(ctx, req) })
}

// Release implements dedupe.Store.
func (f *FaultyStore) Release(ctx context.Context, key, token string) error {
	return f.attempt("Release", func() error { return f.Store.Release(ctx, key, token) })
}

// Get implements dedupe.Store.
func (f *FaultyStore) Get(ctx context.Context, key string, now time.Time) (rec dedupe.Record, err error) {
	err = f.attempt("Get", func() error {
		var e error
		rec, e = f.Store.Get(ctx, key, now)
		return e
	})
	return rec, err
}
