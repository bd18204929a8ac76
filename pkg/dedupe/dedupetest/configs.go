package dedupetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
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

	// NewStoreFor, when set, is used instead of NewStore: it returns an
	// empty store for one history, built for the store configuration and
	// the faults the history drew (StoreConfig), so that a store's own
	// options and dependencies are checked in combination with the
	// guard's: dynamostore's LargeResults (S3) and Lean, faults in the
	// table, in S3, and MRSC replicated-write conflicts.
	NewStoreFor func(t *testing.T, sc StoreConfig) dedupe.Store

	// Histories is the number of random histories. Zero means the value
	// of DEDUPE_CONFIG_HISTORIES, else 300 (well under a second on memstore, a few seconds with -race).
	// Set DEDUPE_CONFIG_HISTORIES=1000000 for a run of minutes.
	Histories int

	// Seed seeds the first history; history i uses Seed+i. Zero means the
	// value of DEDUPE_CONFIG_SEED, else a random seed. A failure names
	// the seed that replays it.
	Seed uint64
}

// StoreConfig is what a history of CheckConfigs asks of the store that
// NewStoreFor builds.
type StoreConfig struct {
	// LargeAbove, when positive, asks that a result whose body exceeds
	// LargeAbove bytes be kept outside its record (dynamostore:
	// LargeResults, with Options.MaxItemBytes = LargeAbove and no
	// compression); the history's responses fall on both sides of it.
	// Zero keeps every result in its record.
	LargeAbove int
	// Lean asks for a store that writes no in-flight index
	// (dynamostore's Options.Lean).
	Lean bool
	// Inject decides the fault of each call the store makes to its
	// backends, by operation: "DynamoDB.<operation>" for the table,
	// "S3.PutObject" and "S3.GetObject" for LargeResults. Ask it at the
	// layer where real faults happen (the HTTP transport under the SDK),
	// so that the SDK's retries are exercised. Calls NewStoreFor makes
	// itself are never faulted.
	Inject Injector
}

// The adapters CheckConfigs draws.
var configAdapters = []string{"HTTPAPI", "RESTAPI", "FunctionURL", "ALB", "Middleware", "SQS", "SQS-FIFO", "Kinesis", "DynamoDBStream", "Once"}

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
	var mix configMix
	for i := range n {
		s := seed + uint64(i)
		h := newConfigHistory(t, s, cfg.NewStoreFor != nil)
		h.quiet = true // construction is not under test
		if cfg.NewStoreFor != nil {
			h.store = cfg.NewStoreFor(t, h.storeConfig())
		} else {
			h.store = cfg.NewStore(t)
		}
		h.quiet = false
		if h.build() {
			h.run()
		} else {
			refused++
		}
		mix.add(h)
		if len(h.violations) > 0 {
			t.Fatalf("seed %d (DEDUPE_CONFIG_SEED=%d DEDUPE_CONFIG_HISTORIES=1), configuration %s:\n%s", s, s, h.describe(), strings.Join(h.violations, "\n"))
		}
	}
	t.Logf("CheckConfigs: %d histories, %d refused at construction; %s", n, refused, &mix)
	checkHandlersOn(t, cfg, n, seed) // Handler, its types and expressions: handlercheck.go
}

// configMix counts what the histories of one CheckConfigs drew and did.
type configMix struct {
	histories, failOpen, large, lean, tableFaults, conflicts, s3Flaky, s3Denied int
	requests, variants, runs, unguarded                                         int
	faults                                                                      map[string]int // "op fault" -> injected
	calls                                                                       map[string]int // op -> calls
}

func (m *configMix) add(h *configHistory) {
	m.histories++
	for _, d := range []struct {
		on bool
		n  *int
	}{{h.failOpen, &m.failOpen}, {h.largeAbove > 0, &m.large}, {h.lean, &m.lean}, {h.tableFaults, &m.tableFaults},
		{h.conflicts, &m.conflicts}, {h.s3Mode == "flaky", &m.s3Flaky}, {h.s3Mode == "denied", &m.s3Denied}} {
		if d.on {
			*d.n++
		}
	}
	m.requests += h.reached
	m.variants += h.variantsSent
	m.runs += h.runs
	m.unguarded += h.unguardedRuns
	if m.faults == nil {
		m.faults = map[string]int{}
	}
	for k, v := range h.faults {
		m.faults[k] += v
	}
	if m.calls == nil {
		m.calls = map[string]int{}
	}
	for k, v := range h.calls {
		m.calls[k] += v
	}
}

func (m *configMix) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "mix: FailOpen %d, LargeResults %d, Lean %d, table faults %d, MRSC conflicts %d, S3 flaky %d, S3 refusing uploads %d (of %d histories); "+
		"%d requests (%d reusing a key for another request), %d runs (%d unguarded)",
		m.failOpen, m.large, m.lean, m.tableFaults, m.conflicts, m.s3Flaky, m.s3Denied, m.histories, m.requests, m.variants, m.runs, m.unguarded)
	for _, part := range []struct {
		name string
		m    map[string]int
	}{{"backend calls", m.calls}, {"faults injected", m.faults}} {
		if len(part.m) == 0 {
			continue
		}
		keys := make([]string, 0, len(part.m))
		for k := range part.m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		fmt.Fprintf(&b, "; %s:", part.name)
		for i, k := range keys {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, " %s %d", k, part.m[k])
		}
	}
	return b.String()
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
	variants   bool // some requests reuse a key for another request

	// The store's configuration and faults (ConfigCheck.NewStoreFor).
	largeAbove  int    // StoreConfig.LargeAbove; 0: none
	lean        bool   // StoreConfig.Lean
	tableFaults bool   // the table throttles, times out and loses replies
	conflicts   bool   // the table refuses writes with replicated-write conflicts
	s3Mode      string // "": no S3 faults; "flaky": S3 calls fail now and then; "denied": every upload is refused
	frng        *rand.Rand
	quiet       bool // no faults (construction, verification)
	burst       int  // conflicts left in the current burst
	s3Burst     map[string]s3Burst

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

	// What the store has said, as the checker sees its calls.
	liveUntil      map[string]time.Time // store key -> its record's expiry, as last written
	completedUntil map[string]time.Time // store key -> expiry of its completed record
	variantRan     map[string]bool      // request identity -> another request ran under its key (a new life)
	// The attempt being sent (histories send one at a time).
	knew          bool // a claim of it got an answer about the key from the backend
	inComplete    bool // a Complete is running
	completeFault bool // a table call of that Complete was faulted

	faults                            map[string]int // "op fault" -> injected
	calls                             map[string]int // op -> calls asked about
	variantsSent, runs, unguardedRuns int
}

// configService is one guard of a history: a service on the shared store.
type configService struct {
	name  string
	guard *dedupe.Guard
}

func newConfigHistory(t *testing.T, seed uint64, storeOptions bool) *configHistory {
	h := &configHistory{
		t:              t,
		rng:            rand.New(rand.NewPCG(seed, seed^0x5afe0f10a)),
		frng:           rand.New(rand.NewPCG(seed^0x2545f4914f6cdd1d, seed)),
		dks:            map[string]string{},
		life:           map[string]string{},
		effects:        map[string]int{},
		work:           map[string]bool{},
		answers:        map[string]string{},
		liveUntil:      map[string]time.Time{},
		completedUntil: map[string]time.Time{},
		variantRan:     map[string]bool{},
		faults:         map[string]int{},
		calls:          map[string]int{},
		s3Burst:        map[string]s3Burst{},
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
	h.variants = r.IntN(3) == 0
	if storeOptions {
		if r.IntN(2) == 0 {
			h.largeAbove = configLargeAbove
			h.s3Mode = []string{"", "flaky", "flaky", "denied"}[r.IntN(4)]
			// A cached replay reads nothing from S3: keep the cache
			// rarer where S3 is under test.
			h.cache = h.cache && r.IntN(3) == 0
			// Another request under a key whose response S3 cannot give
			// back must still get 422: draw such requests where S3 fails.
			h.variants = h.variants || h.s3Mode == "flaky"
		}
		h.lean = r.IntN(3) == 0
		h.tableFaults = r.IntN(3) == 0
		h.conflicts = r.IntN(4) == 0
	}
	return h
}

// s3Burst is a fault that repeats on the next n calls of its operation.
type s3Burst struct {
	f Fault
	n int
}

// configLargeAbove is StoreConfig.LargeAbove when a history draws
// LargeResults; half its requests answer bodies above it.
const configLargeAbove = 4096

// storeConfig is the StoreConfig of the history.
func (h *configHistory) storeConfig() StoreConfig {
	return StoreConfig{LargeAbove: h.largeAbove, Lean: h.lean, Inject: h.inject}
}

// inject draws the fault of one backend call of the history's store.
func (h *configHistory) inject(op string) Fault {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.quiet {
		return FaultNone
	}
	h.calls[op]++
	f := FaultNone
	r := h.frng
	switch {
	case op == "DynamoDB.DescribeTable":
	case h.conflicts && (op == "DynamoDB.PutItem" || op == "DynamoDB.UpdateItem") && (h.burst > 0 || r.IntN(10) == 0):
		// A burst of conflicts: another Region writes the item for a
		// while; a burst of 4 or more outlasts the store's retries.
		if h.burst == 0 {
			h.burst = 1 + r.IntN(6)
		}
		h.burst--
		f = FaultConflict
	case h.tableFaults && strings.HasPrefix(op, "DynamoDB.") && r.IntN(100) < 8:
		f = []Fault{FaultThrottle, FaultTimeout, FaultLostReply}[r.IntN(3)]
	case h.s3Mode == "denied" && op == "S3.PutObject":
		f = FaultDenied
	case h.s3Mode == "flaky" && strings.HasPrefix(op, "S3.") && h.s3Burst[op].n > 0:
		// S3 keeps failing alike for a while, so that some faults
		// outlast the SDK's retries.
		b := h.s3Burst[op]
		f, b.n = b.f, b.n-1
		h.s3Burst[op] = b
	case h.s3Mode == "flaky" && op == "S3.PutObject" && r.IntN(100) < 25:
		f = []Fault{FaultThrottle, FaultThrottle, FaultLostReply, FaultTimeout, FaultDenied}[r.IntN(5)]
		h.s3Burst[op] = s3Burst{f, r.IntN(4)}
	case h.s3Mode == "flaky" && op == "S3.GetObject" && r.IntN(100) < 50:
		f = []Fault{FaultThrottle, FaultTimeout, FaultCut, FaultCut, FaultDenied, FaultMissing}[r.IntN(6)]
		if f != FaultMissing {
			h.s3Burst[op] = s3Burst{f, r.IntN(4)}
		}
	}
	if f != FaultNone {
		h.faults[op+" "+f.String()]++
		if h.inComplete && strings.HasPrefix(op, "DynamoDB.") {
			h.completeFault = true
		}
	}
	// What the claim of the attempt learnt: a write or read of the table
	// that got through, or a conflict, is an answer about the key; a
	// read of S3 only follows a record read.
	switch {
	case !h.inComplete && (op == "DynamoDB.PutItem" || op == "DynamoDB.UpdateItem" || op == "DynamoDB.GetItem") && (f == FaultNone || f == FaultConflict):
		h.knew = true
	case op == "S3.GetObject":
		h.knew = true
	}
	return f
}

func (h *configHistory) describe() string {
	return fmt.Sprintf("adapter=%s principal=%s prefix=%s SharedScope=%v FailOpen=%v claimFails=%v Cache=%v Wait=%v Heartbeat=%v extender=%v MinHold=%v Retention=%v keepAll=%v keyFunc=%v ShareSources=%v variants=%v LargeAbove=%d Lean=%v tableFaults=%v conflicts=%v s3=%q",
		h.adapter, h.principal, h.prefixMode, h.shared, h.failOpen, h.claimFails, h.cache, h.wait, h.heartbeat, h.extender, h.minHold, h.retention, h.keepAll, h.keyFunc, h.shareSrc,
		h.variants, h.largeAbove, h.lean, h.tableFaults, h.conflicts, h.s3Mode)
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
	svc     int
	tenant  string
	stage   string // API stage, or event source ARN
	key     string
	variant bool // another request (another body) under the key of the same identity
}

// payload is the request's body.
func (r request) payload() string {
	if r.variant {
		return `{"order":"` + r.key + `","note":"another request"}`
	}
	return `{"order":"` + r.key + `"}`
}

// scopeTenant returns the tenant a request is scoped by: its own, or
// "anon" when its principal source carries no identity and the adapter
// lets anonymous callers share a scope.
func (h *configHistory) scopeTenant(tenant string) string {
	if h.isBatch() || h.adapter == "Once" {
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
		// ALB: jwt and cognito are the listener's signed user claims
		// (ALBAuth); lambda-id there is headers a client forged.
		return h.adapter != "FunctionURL" && h.adapter != "Middleware" && (h.adapter != "ALB" || h.principal != "lambda-id")
	case "iam":
		return h.adapter != "Middleware" && h.adapter != "ALB"
	}
	return true // func
}

func (h *configHistory) isBatch() bool {
	switch h.adapter {
	case "SQS", "SQS-FIFO", "Kinesis", "DynamoDBStream":
		return true
	}
	return false
}

// identity names a request's scope and life.
func (h *configHistory) identity(r request) string {
	stage := r.stage
	if h.isBatch() && h.shareSrc {
		stage = "*"
	}
	if h.adapter == "Once" || h.adapter == "Middleware" {
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
		if h.retention == 0 && h.rng.IntN(10) == 0 {
			// Past every lease, well within the default retention (a
			// day): stranded records may be taken over, completed ones
			// never run again.
			h.clock.Add(int64(16 * time.Minute))
		}
		r := request{svc: h.rng.IntN(2), tenant: tenants[h.rng.IntN(2)], stage: stages[h.rng.IntN(2)], key: keys[h.rng.IntN(len(keys))]}
		if h.variants && !h.isBatch() && h.rng.IntN(3) == 0 {
			h.mu.Lock()
			_, ran := h.life[h.identity(r)]
			h.mu.Unlock()
			// Only a key whose first request ran guarded, so that its
			// record binds the key to that request's fingerprint.
			r.variant = ran
		}
		for range 1 + h.rng.IntN(3) {
			h.clock.Add(int64(time.Duration(h.rng.IntN(2000)) * time.Millisecond))
			h.send(r)
		}
	}
	h.checkAdmin()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.events != h.reached {
		h.violations = append(h.violations, fmt.Sprintf("%d events for %d requests that reached a guard, want exactly one each", h.events, h.reached))
	}
}

// checkAdmin checks the store's dedupe.Admin, if it has one, at the end
// of a history: InFlight either refuses (errors.ErrUnsupported) or lists
// every record of the history that is in flight.
func (h *configHistory) checkAdmin() {
	a, ok := h.store.(dedupe.Admin)
	if !ok {
		return
	}
	h.mu.Lock()
	h.quiet = true
	keys := make([]string, 0, len(h.liveUntil))
	for k := range h.liveUntil {
		keys = append(keys, k)
	}
	h.mu.Unlock()
	defer func() { h.mu.Lock(); h.quiet = false; h.mu.Unlock() }()
	ctx := context.Background()
	now := h.now()
	// One record surely in flight, whatever the history left.
	probe := fmt.Sprintf("configcheck/in-flight/%d", h.rng.Uint64())
	if res, err := h.store.Claim(ctx, dedupe.ClaimRequest{Key: probe, Fingerprint: "fp", Token: "probe", Now: now,
		LeaseUntil: now.Add(time.Minute), ExpiresAt: now.Add(time.Hour)}); err != nil || !res.Acquired {
		h.violate("claim of the in-flight probe: %+v, %v", res, err)
		return
	}
	keys = append(keys, probe)
	recs, truncated, err := a.InFlight(ctx, now, 1000)
	switch {
	case errors.Is(err, errors.ErrUnsupported):
		return
	case err != nil:
		h.violate("Admin.InFlight: %v", err)
		return
	case truncated:
		return
	}
	listed := map[string]bool{}
	for _, r := range recs {
		listed[r.Key] = true
	}
	for _, k := range keys {
		rec, err := h.store.Get(ctx, k, now)
		// Released records (lease 0) have nothing left to list.
		if err == nil && rec.Status == dedupe.StatusInProgress && rec.LeaseExpiresAt.UnixMilli() != 0 && !listed[k] {
			h.violate("Admin.InFlight did not list %s, which is in flight (lease until %v): an Admin method must do what it says or refuse", dedupe.KeyRef(k), rec.LeaseExpiresAt)
		}
	}
}

// charge is the guarded work: it checks the claim, charges the model
// processor once per downstream key, and marks the request's work done.
// It returns the answer body, which names the scope it ran in.
func (h *configHistory) charge(ctx context.Context, id string, variant bool) string {
	c, ok := dedupe.ClaimFrom(ctx)
	dk := c.DownstreamKey()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.runs++
	if c.Unguarded {
		h.unguardedRuns++
	}
	now := h.now()
	live := func(m map[string]time.Time) bool {
		until, ok := m[c.Key]
		return ok && now.Unix() <= until.Unix()
	}
	// A request the store has answered about never runs unguarded; one
	// it recorded as completed never runs again, and another request
	// never runs under a key bound to the first (only one without any
	// answer may run unguarded, FailOpen's documented trade).
	switch {
	case c.Unguarded && h.knew:
		h.violations = append(h.violations, fmt.Sprintf("%s: ran unguarded although the store had answered about the key (FailOpen acts on no answer only)", id))
	case live(h.completedUntil) && (!c.Unguarded || h.knew):
		h.violations = append(h.violations, fmt.Sprintf("%s: ran again after the store recorded it completed", id))
	case variant && live(h.liveUntil) && !c.Unguarded:
		h.violations = append(h.violations, fmt.Sprintf("%s: another request (another body) ran under a key bound to the first", id))
	}
	if variant && !c.Unguarded {
		h.variantRan[id] = true // the key's record expired: a new binding
		return h.answerBody(id)
	}
	if variant {
		return h.answerBody(id)
	}
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
	return h.answerBody(id)
}

// answerBody is the body of the answer to id: "answer for <id>", padded
// past StoreConfig.LargeAbove for the keys order-1 and order-2 when the
// history draws LargeResults (order-3 stays small), so that responses
// fall on both sides of it.
func (h *configHistory) answerBody(id string) string {
	body := "answer for " + id
	if h.largeAbove > 0 && !strings.Contains(id, "|order-3|") {
		body += "~" + strings.Repeat("#", h.largeAbove+2048)
	}
	return body
}

func seen(m map[string]string, k string) bool { _, ok := m[k]; return ok }

// answered checks one answer body a sender received for its request.
func (h *configHistory) answered(id, body string, replayed bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if want := "answer for " + id; strings.SplitN(body, "~", 2)[0] != want {
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
	h.mu.Lock()
	h.knew = false
	if r.variant {
		h.variantsSent++
	}
	h.mu.Unlock()
	id := h.identity(r)
	svc := h.services[r.svc]
	ctx := context.Background()
	switch h.adapter {
	case "Once":
		h.reach()
		payload := []byte(r.payload())
		fn := func(ctx context.Context) (string, error) { return h.charge(ctx, id, r.variant), nil }
		a, err := dedupe.Once(ctx, svc.guard, r.key, payload, fn)
		v, replayed := a.Value, a.Replayed
		if r.variant && (replayed || errors.Is(err, dedupe.ErrResultUnreadable) || errors.Is(err, dedupe.ErrResultOmitted)) && !h.variantBound(id) {
			h.violate("%s: another request under its key got %v (replayed %v); want ErrFingerprintMismatch", id, err, replayed)
		}
		if v != "" {
			h.answered(id, v, replayed)
		} else if err == nil {
			h.violate("%s: no value and no error", id)
		}
	case "SQS", "SQS-FIFO", "Kinesis", "DynamoDBStream":
		h.sendBatch(r, id, svc)
	default:
		h.sendHTTP(r, id, svc)
	}
}

// sendBatch sends r as a batch of one item, and checks that an item
// reported processed or duplicate had its work done.
func (h *configHistory) sendBatch(r request, id string, svc *configService) {
	ctx := context.Background()
	body := r.payload()
	arn := "arn:aws:sqs:eu-west-1:123456789012:" + r.stage
	// Sometimes the item function fails after a nested guarded call of
	// its own failed to record (ErrNotStored), without doing the work.
	nestedFail := h.rng.IntN(4) == 0
	var status dedupe.ItemStatus
	onItem := func(o dedupe.ItemOutcome) { status = o.Status }
	work := func(ctx context.Context) error {
		if nestedFail {
			return fmt.Errorf("nested Once: %w", dedupe.ErrNotStored)
		}
		h.charge(ctx, id, r.variant)
		return nil
	}
	h.reach()
	switch h.adapter {
	case "SQS", "SQS-FIFO":
		if h.adapter == "SQS-FIFO" {
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
		dedupe.SQS(svc.guard, cfg, func(ctx context.Context, _ events.SQSMessage) error { return work(ctx) })(ctx, events.SQSEvent{Records: []events.SQSMessage{m}})
	case "Kinesis":
		rec := events.KinesisEventRecord{EventID: r.key, EventSourceArn: strings.Replace(arn, ":sqs:", ":kinesis:", 1),
			Kinesis: events.KinesisRecord{SequenceNumber: fmt.Sprint(h.rng.Uint64()), Data: []byte(body)}}
		dedupe.Kinesis(svc.guard, &dedupe.KinesisConfig{OnItem: onItem, ShareSources: h.shareSrc, Logger: discard}, func(ctx context.Context, _ events.KinesisEventRecord) error { return work(ctx) })(ctx, events.KinesisEvent{Records: []events.KinesisEventRecord{rec}})
	case "DynamoDBStream":
		rec := events.DynamoDBEventRecord{EventID: r.key, EventName: "INSERT", EventSourceArn: strings.Replace(arn, ":sqs:", ":dynamodb:", 1),
			Change: events.DynamoDBStreamRecord{SequenceNumber: fmt.Sprint(h.rng.Uint64())}}
		dedupe.DynamoDBStream(svc.guard, &dedupe.DynamoDBStreamConfig{OnItem: onItem, ShareSources: h.shareSrc, Logger: discard}, func(ctx context.Context, _ events.DynamoDBEventRecord) error { return work(ctx) })(ctx, events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{rec}})
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
	body := r.payload()
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
			case *events.ALBTargetGroupRequest:
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
	var albSign func(sub string) string
	if h.adapter == "ALB" {
		var ok bool
		if albSign, ok = h.albRuleSet(cfg, svc); !ok {
			return // refused at construction, as checked there
		}
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
			return events.APIGatewayV2HTTPResponse{StatusCode: 201, Body: h.charge(ctx, id, r.variant)}, nil
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
			return events.APIGatewayProxyResponse{StatusCode: 201, Body: h.charge(ctx, id, r.variant)}, nil
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
			return events.LambdaFunctionURLResponse{StatusCode: 201, Body: h.charge(ctx, id, r.variant)}, nil
		})(ctx, ev)
		if err != nil {
			h.violate("%s: FunctionURL error %v", id, err)
		}
		status, respBody, replayed = resp.StatusCode, resp.Body, resp.Headers[dedupe.HeaderReplayed] == "true"
	case "ALB":
		status, respBody, replayed = h.sendALB(r, id, svc, cfg, headers, body, albSign)
	case "Middleware":
		mw := dedupe.Middleware(svc.guard, cfg)(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			w.WriteHeader(201)
			w.Write([]byte(h.charge(req.Context(), id, r.variant)))
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
	var problem dedupe.Problem
	if status >= 400 {
		json.Unmarshal([]byte(respBody), &problem)
	}
	bound := h.variantBound(id)
	switch {
	case status == 201:
		if wantRefused {
			h.violate("%s: answered 201 with no principal and SharedScope off", id)
		}
		if r.variant && replayed && !bound {
			h.violate("%s: another request under its key got the first one's replay", id)
		}
		h.answered(id, respBody, replayed)
	case status == 500 && wantRefused:
	case r.variant && !bound && (problem.Type == dedupe.ProblemResultUnreadable || problem.Type == dedupe.ProblemResultUnavailable):
		// The fingerprints are compared before any result is read.
		h.violate("%s: another request under its key got %d %s; want 422 whatever failed after the read", id, status, problem.Type)
	case status == 422 && (r.variant || bound):
	case status == 409 || status == 503:
	default:
		h.violate("%s: unexpected status %d %q", id, status, respBody)
	}
}

// variantBound reports whether a request of id under another body ran
// guarded (after the first one's record expired), binding the key to it:
// the first one's retries may then get its mismatch.
func (h *configHistory) variantBound(id string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.variantRan[id]
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
	res, err := s.Store.Claim(ctx, req)
	h := s.h
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case err == nil && res.Acquired:
		h.liveUntil[req.Key] = req.ExpiresAt
	case errors.Is(err, dedupe.ErrStoreUnavailable) && h.knew && !s.h.claimFails:
		// Only the store's own errors count here (claimFails are the
		// checker's, before the store is asked).
		h.violations = append(h.violations, fmt.Sprintf("Claim %s = %v after the backend answered about the key: unavailable means no answer was received", dedupe.KeyRef(req.Key), err))
	}
	return res, err
}

func (s *configStore) Complete(ctx context.Context, req dedupe.CompleteRequest) error {
	h := s.h
	h.mu.Lock()
	h.inComplete, h.completeFault = true, false
	h.mu.Unlock()
	err := s.Store.Complete(ctx, req)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.inComplete = false
	switch {
	case err == nil || errors.Is(err, dedupe.ErrResultTooLarge):
		h.completedUntil[req.Key] = req.ExpiresAt
		h.liveUntil[req.Key] = req.ExpiresAt
	case errors.Is(err, dedupe.ErrLeaseLost):
	case !h.completeFault:
		// Only a failure of the table itself may leave a finished
		// request in flight (ErrNotStored): after its lease, a retry
		// would run it again.
		h.violations = append(h.violations, fmt.Sprintf("Complete %s = %v while the table answered every call: a finished request would run again after its lease", dedupe.KeyRef(req.Key), err))
	}
	return err
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
