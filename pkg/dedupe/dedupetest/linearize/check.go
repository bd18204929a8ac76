package linearize

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"maps"
	"math"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe/dedupetest"
)

// Environment variables read by Check and ExpectViolation.
const (
	// EnvHistories sets the number of histories when Config.Histories
	// is zero: the long run, e.g. DEDUPE_LINEARIZE_HISTORIES=500.
	EnvHistories = "DEDUPE_LINEARIZE_HISTORIES"
	// EnvSeed sets the first history's seed when Config.Seed is zero.
	EnvSeed = "DEDUPE_LINEARIZE_SEED"
	// EnvOut is the directory porcupine's visualization of a failed
	// history is written to; empty means os.TempDir().
	EnvOut = "DEDUPE_LINEARIZE_OUT"
)

// The defaults of Config.
const (
	DefaultHistories    = 6
	DefaultClients      = 4
	DefaultKeys         = 2
	DefaultOps          = 24
	DefaultFaultPercent = 10
	DefaultCheckTimeout = time.Minute
	// callTimeout bounds one store call.
	callTimeout = 20 * time.Second
)

// defaultMix is the default Config.Mix: about a third claims, and
// enough completions, releases and renewals by stale owners that every
// branch of the contract is taken in every history.
func defaultMix() [5]int { return [5]int{Claim: 35, Get: 20, Complete: 20, Release: 12, Extend: 13} }

// Config configures Check and ExpectViolation.
type Config struct {
	// NewStore returns the store one client of one history uses. Every
	// call the store makes to its backend must ask inject what to do, at
	// the layer where real faults happen (an HTTP transport under the
	// SDK's retryer, a connection the driver dials), so that the client's
	// own retries are exercised; dedupetest.FaultyStore does this for a
	// store without such a layer. Each client gets its own store, so that
	// a lost reply is charged to the call that suffered it. Calls
	// NewStore itself makes (dynamostore's DescribeTable) are never
	// faulted: construction is not under test.
	NewStore func(t *testing.T, inject dedupetest.Injector) dedupe.Store

	// Histories is the number of histories. Zero means the value of
	// DEDUPE_LINEARIZE_HISTORIES, else DefaultHistories.
	Histories int
	// Seed seeds the first history; history i uses Seed+i. Zero means
	// DEDUPE_LINEARIZE_SEED, else a random seed. It is printed.
	Seed uint64
	// Clients, Keys and Ops (calls per client) shape each history; zero
	// means the defaults.
	Clients, Keys, Ops int
	// Mix weighs the methods a client calls, indexed by Kind (Claim,
	// Get, Complete, Release, Extend). The zero Mix means 35, 20, 20, 12, 13.
	// Extend's weight goes to Claim on a store without
	// dedupe.LeaseExtender.
	Mix [5]int
	// FaultPercent is the share of backend calls that get a fault (a lost
	// reply, a throttle or a timeout, equally likely). Zero means
	// DefaultFaultPercent; negative means none.
	FaultPercent int
	// StrictFirstToken requires every record a store returns to carry the
	// FirstToken the specification gives it. Without it an empty
	// FirstToken is accepted (the contract allows it on records written
	// before FirstToken existed).
	StrictFirstToken bool
	// CheckTimeout bounds porcupine's search per history; zero means
	// DefaultCheckTimeout. A search that times out is reported, and
	// counts as a failure.
	CheckTimeout time.Duration
}

func (c Config) withDefaults() Config {
	if c.Histories <= 0 {
		c.Histories = envInt(EnvHistories, DefaultHistories)
	}
	if c.Seed == 0 {
		c.Seed = uint64(envInt(EnvSeed, 0))
	}
	if c.Seed == 0 {
		c.Seed = mrand.Uint64() >> 1
	}
	if c.Clients <= 0 {
		c.Clients = DefaultClients
	}
	if c.Keys <= 0 {
		c.Keys = DefaultKeys
	}
	if c.Ops <= 0 {
		c.Ops = DefaultOps
	}
	if c.Mix == [5]int{} {
		c.Mix = defaultMix()
	}
	if c.FaultPercent == 0 {
		c.FaultPercent = DefaultFaultPercent
	}
	if c.CheckTimeout <= 0 {
		c.CheckTimeout = DefaultCheckTimeout
	}
	return c
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// Check records cfg.Histories concurrent histories of the stores
// cfg.NewStore makes and fails t when porcupine finds one that is not
// linearizable against the specification (Model), or cannot decide in
// time. It logs the seed, the history counts and the mix of outcomes;
// a failure names the seed that replays it and the file holding
// porcupine's visualization of the history.
func Check(t *testing.T, cfg Config) {
	t.Helper()
	cfg = cfg.withDefaults()
	t.Logf("linearize.Check: seed %d, %d histories of %d clients × %d calls on %d keys, %d%% faults (replay one with %s=<seed> %s=1)",
		cfg.Seed, cfg.Histories, cfg.Clients, cfg.Ops, cfg.Keys, max(cfg.FaultPercent, 0), EnvSeed, EnvHistories)
	var total stats
	began := time.Now()
	for i := range cfg.Histories {
		seed := cfg.Seed + uint64(i)
		ok := t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			h := record(t, cfg, seed)
			total.add(h.stats)
			res, info := h.check(cfg)
			switch res {
			case porcupine.Ok:
				return
			case porcupine.Illegal:
				t.Errorf("seed %d: the history is not linearizable against memstore's semantics; %s", seed, h.visualize(t, info))
			default:
				t.Errorf("seed %d: porcupine could not decide within %v (%d operations)", seed, cfg.CheckTimeout, len(h.ops))
			}
		})
		if !ok {
			t.Logf("replay with %s=%d %s=1", EnvSeed, seed, EnvHistories)
			return
		}
	}
	t.Logf("linearize.Check: %d histories linearizable in %v; %s", cfg.Histories, time.Since(began).Round(time.Millisecond), total.String())
}

// ExpectViolation records up to cfg.Histories histories and passes at the
// first one porcupine finds not linearizable; it fails t when none is. It
// proves that Check catches a broken store (a mutant, a server known to
// be racy).
func ExpectViolation(t *testing.T, cfg Config) {
	t.Helper()
	cfg = cfg.withDefaults()
	began := time.Now()
	for i := range cfg.Histories {
		seed := cfg.Seed + uint64(i)
		var res porcupine.CheckResult
		var info porcupine.LinearizationInfo
		var h *history
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			h = record(t, cfg, seed)
			res, info = h.check(cfg)
		})
		if res == porcupine.Illegal {
			t.Logf("violation found, as expected, in history %d (seed %d) after %v; %s", i+1, seed, time.Since(began).Round(time.Millisecond), h.visualize(t, info))
			return
		}
	}
	t.Errorf("no violation in %d histories from seed %d (%v): the checker missed a store known to be broken", cfg.Histories, cfg.Seed, time.Since(began).Round(time.Millisecond))
}

// history is one recorded history.
type history struct {
	seed  uint64
	ops   []porcupine.Operation
	stats stats
	model porcupine.Model
}

// stats counts what a history exercised.
type stats struct {
	histories, calls, recorded, faults, lost, unknown int
	outcomes                                          map[string]int
}

func (s *stats) add(o stats) {
	s.histories++
	s.calls += o.calls
	s.recorded += o.recorded
	s.faults += o.faults
	s.lost += o.lost
	s.unknown += o.unknown
	if s.outcomes == nil {
		s.outcomes = map[string]int{}
	}
	for k, v := range o.outcomes {
		s.outcomes[k] += v
	}
}

func (s stats) String() string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(s.outcomes)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, s.outcomes[k]))
	}
	return fmt.Sprintf("%d calls (%d operations checked), %d faults injected, %d replies lost, %d outcomes unknown; %s",
		s.calls, s.recorded, s.faults, s.lost, s.unknown, strings.Join(parts, ", "))
}

// check runs porcupine on the history.
func (h *history) check(cfg Config) (porcupine.CheckResult, porcupine.LinearizationInfo) {
	return porcupine.CheckOperationsVerbose(h.model, h.ops, cfg.CheckTimeout)
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// visualize writes porcupine's visualization of the history and returns
// a sentence naming the file.
func (h *history) visualize(t *testing.T, info porcupine.LinearizationInfo) string {
	dir := os.Getenv(EnvOut)
	if dir == "" {
		dir = os.TempDir()
	}
	path := filepath.Join(dir, fmt.Sprintf("linearize-%s.html", unsafeName.ReplaceAllString(t.Name(), "_")))
	if err := porcupine.VisualizePath(h.model, info, path); err != nil {
		return fmt.Sprintf("the visualization could not be written: %v", err)
	}
	return "porcupine's visualization: " + path + "\n" + h.explain(info)
}

// explain describes, for each key whose history is not linearizable, the
// longest linearization porcupine found and the operations none of which
// can come next.
func (h *history) explain(info porcupine.LinearizationInfo) string {
	var b strings.Builder
	partials := info.PartialLinearizationsOperations()
	for p, ops := range partitionByKey(h.ops) {
		if p >= len(partials) {
			break
		}
		var longest []porcupine.Operation
		for _, l := range partials[p] {
			if len(l) > len(longest) {
				longest = l
			}
		}
		if len(longest) == len(ops) {
			continue
		}
		fmt.Fprintf(&b, "key %s: %d of %d operations linearized; the longest linearization found:\n", ops[0].Input.(Input).Key, len(longest), len(ops))
		done := map[string]bool{}
		for _, op := range longest {
			fmt.Fprintf(&b, "  %s\n", describeTimed(op))
			done[describeTimed(op)] = true
		}
		b.WriteString("then none of these can come next:\n")
		rest := slices.Clone(ops)
		slices.SortFunc(rest, func(a, b porcupine.Operation) int { return int(a.Call - b.Call) })
		for _, op := range rest {
			if !done[describeTimed(op)] {
				fmt.Fprintf(&b, "  %s\n", describeTimed(op))
			}
		}
	}
	return b.String()
}

// describeTimed describes op with its client and real-time interval.
func describeTimed(op porcupine.Operation) string {
	ret := "∞"
	if op.Return != math.MaxInt64 {
		ret = fmt.Sprintf("%.3fms", float64(op.Return)/1e6)
	}
	return fmt.Sprintf("[c%d %.3fms..%s] %s", op.ClientId, float64(op.Call)/1e6, ret, describeOp(op.Input.(Input), op.Output.(Output)))
}

// keyTokens is the tokens claimed on one key, by anyone.
type keyTokens struct {
	mu     sync.Mutex
	tokens []string
}

func (k *keyTokens) add(tok string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.tokens = append(k.tokens, tok)
}

func (k *keyTokens) pick(rng *mrand.Rand) string {
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.tokens) == 0 {
		return ""
	}
	return k.tokens[rng.IntN(len(k.tokens))]
}

// recorder is the shared state of one history being recorded.
type recorder struct {
	cfg    Config
	seed   uint64
	start  time.Time
	baseMs int64
	clock  atomic.Int64 // ms since baseMs
	keys   []string
	tokens []keyTokens

	mu    sync.Mutex
	ops   []porcupine.Operation
	stats stats
}

// record runs one history and returns it.
func record(t *testing.T, cfg Config, seed uint64) *history {
	t.Helper()
	r := &recorder{cfg: cfg, seed: seed, tokens: make([]keyTokens, cfg.Keys)}
	r.stats.outcomes = map[string]int{}
	// Times lie a year ahead, so that no server's own clock (Redis's key
	// expiry) ever acts on them, and are whole seconds apart per seed.
	r.baseMs = time.Now().Add(365*24*time.Hour).Truncate(time.Second).UnixMilli() + int64(seed%1000)*1000
	run := strings.ToLower(rand.Text()[:8])
	for i := range cfg.Keys {
		r.keys = append(r.keys, fmt.Sprintf("lin/%s/%d/k%d", run, seed, i))
	}
	clients := make([]*client, cfg.Clients)
	for i := range clients {
		c := &client{id: i, r: r,
			rng:  mrand.New(mrand.NewPCG(seed, uint64(i)*2+1)),
			frng: mrand.New(mrand.NewPCG(seed, uint64(i)*2+2)),
			own:  make([][]string, cfg.Keys)}
		c.store = cfg.NewStore(t, c.inject)
		c.ext, _ = c.store.(dedupe.LeaseExtender)
		c.live.Store(true)
		clients[i] = c
	}
	r.start = time.Now()
	var wg sync.WaitGroup
	for _, c := range clients {
		wg.Go(c.run)
	}
	wg.Wait()
	t.Logf("seed %d: %s", seed, r.stats.String())
	return &history{seed: seed, ops: r.ops, stats: r.stats, model: Model(cfg.StrictFirstToken)}
}

// client is one concurrent caller with a store of its own.
type client struct {
	id    int
	r     *recorder
	rng   *mrand.Rand // draws the calls; used by the client's goroutine only
	store dedupe.Store
	ext   dedupe.LeaseExtender
	own   [][]string // tokens this client claimed, per key

	live   atomic.Bool // faults on: NewStore has returned
	fmu    sync.Mutex
	frng   *mrand.Rand // draws faults
	lost   atomic.Int64
	faults atomic.Int64
}

// inject is the client's dedupetest.Injector.
func (c *client) inject(string) dedupetest.Fault {
	if c.r.cfg.FaultPercent < 0 || !c.live.Load() {
		return dedupetest.FaultNone
	}
	c.fmu.Lock()
	defer c.fmu.Unlock()
	if c.frng.IntN(100) >= c.r.cfg.FaultPercent {
		return dedupetest.FaultNone
	}
	f := dedupetest.Fault(1 + c.frng.IntN(3))
	c.faults.Add(1)
	if f == dedupetest.FaultLostReply {
		c.lost.Add(1)
	}
	return f
}

func (c *client) run() {
	for range c.r.cfg.Ops {
		c.call()
	}
	c.r.mu.Lock()
	c.r.stats.faults += int(c.faults.Load())
	c.r.mu.Unlock()
}

// pickToken draws the token of a Complete, Release or Extend on key k:
// mostly the client's latest claim's, sometimes an older one of its own
// (a stale owner), someone else's, or one never claimed.
func (c *client) pickToken(k int) string {
	own := c.own[k]
	switch p := c.rng.IntN(100); {
	case p < 55 && len(own) > 0:
		return own[len(own)-1]
	case p < 75 && len(own) > 0:
		return own[c.rng.IntN(len(own))]
	case p < 95:
		if tok := c.r.tokens[k].pick(c.rng); tok != "" {
			return tok
		}
	}
	return fmt.Sprintf("never-%d-%d", c.id, c.rng.IntN(1000))
}

// call draws one call, makes it and records it.
func (c *client) call() {
	r, rng := c.r, c.rng
	k := rng.IntN(len(r.keys))
	in := Input{Key: r.keys[k], Client: c.id}
	offset := r.clock.Add(rng.Int64N(200))
	in.NowMs = r.baseMs + offset + rng.Int64N(201) - 100
	now := time.UnixMilli(in.NowMs).Add(time.Duration(rng.Int64N(int64(time.Millisecond))))
	at := func(ms int64) time.Time {
		return time.UnixMilli(ms).Add(time.Duration(rng.Int64N(int64(time.Millisecond))))
	}

	mix := r.cfg.Mix
	if c.ext == nil {
		mix[Claim], mix[Extend] = mix[Claim]+mix[Extend], 0
	}
	w := rng.IntN(mix[0] + mix[1] + mix[2] + mix[3] + mix[4])
	for k, weight := range mix {
		if w < weight {
			in.Kind = Kind(k)
			break
		}
		w -= weight
	}

	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	var (
		err    error
		out    Output
		lease  time.Time
		expire time.Time
	)
	switch in.Kind {
	case Claim, Extend:
		lease = at(in.NowMs + rng.Int64N(1200))
		expire = at(lease.UnixMilli() + rng.Int64N(3000))
		in.LeaseMs, in.ExpSec = lease.UnixMilli(), expire.Unix()
	case Complete:
		expire = at(in.NowMs + rng.Int64N(4000))
		in.ExpSec = expire.Unix()
	}
	var result dedupe.Result
	switch in.Kind {
	case Claim:
		in.Fingerprint = "fp-a"
		if rng.IntN(100) < 35 {
			in.Fingerprint = "fp-b"
		}
		switch p := rng.IntN(100); {
		case p < 25 && len(c.own[k]) > 0:
			in.Token = c.own[k][len(c.own[k])-1]
		case p < 40:
			in.Token = r.tokens[k].pick(rng)
		}
		in.reused = in.Token != ""
		if in.Token == "" {
			in.Token = fmt.Sprintf("t%d-%d-%d", c.id, len(c.own[k]), rng.IntN(1000))
		}
		c.own[k] = append(c.own[k], in.Token)
		r.tokens[k].add(in.Token)
	case Complete, Release, Extend:
		in.Token = c.pickToken(k)
	}
	if in.Kind == Complete {
		in.Omit = rng.IntN(100) < 15
		result = dedupe.Result{StatusCode: 200 + rng.IntN(3)}
		if rng.IntN(2) == 0 {
			result.Headers = map[string][]string{"X-Op": {fmt.Sprintf("c%d", c.id), "v\xe9"}}
		}
		if rng.IntN(5) > 0 {
			result.Body = fmt.Appendf(nil, "r%d-%d\x00\xff", c.id, offset)
		}
		if !in.Omit {
			in.Result = Result{Status: result.StatusCode, Headers: encodeHeaders(result.Headers), Body: string(result.Body)}
		}
	}

	lostBefore := c.lost.Load()
	call := time.Since(r.start).Nanoseconds()
	switch in.Kind {
	case Claim:
		var res dedupe.ClaimResult
		res, err = c.store.Claim(ctx, dedupe.ClaimRequest{Key: in.Key, Fingerprint: in.Fingerprint, Token: in.Token,
			Now: now, LeaseUntil: lease, ExpiresAt: expire})
		out = Output{Acquired: res.Acquired, Record: observe(res.Record)}
	case Get:
		var rec dedupe.Record
		rec, err = c.store.Get(ctx, in.Key, now)
		out.Record = observe(rec)
	case Complete:
		err = c.store.Complete(ctx, dedupe.CompleteRequest{Key: in.Key, Token: in.Token, Result: result,
			Now: now, ExpiresAt: expire, OmitResult: in.Omit})
	case Release:
		in.NowMs = 0
		err = c.store.Release(ctx, in.Key, in.Token)
	case Extend:
		err = c.ext.Extend(ctx, dedupe.ExtendRequest{Key: in.Key, Token: in.Token, Now: now, LeaseUntil: lease, ExpiresAt: expire})
	}
	ret := time.Since(r.start).Nanoseconds()
	lost := int(c.lost.Load() - lostBefore)

	switch {
	case err == nil:
	case errors.Is(err, dedupe.ErrLeaseLost) && in.Kind != Claim && in.Kind != Get:
		out = Output{Outcome: LeaseLost}
	case errors.Is(err, dedupe.ErrNotFound) && in.Kind == Get:
		out = Output{Outcome: NotFound}
	default:
		out = Output{Outcome: Unknown}
	}

	r.mu.Lock()
	defer r.mu.Unlock()
	r.stats.calls++
	r.stats.lost += lost
	r.stats.outcomes[outcomeName(in, out)]++
	if out.Outcome == Unknown {
		r.stats.unknown++
		if in.Kind == Get {
			return // a read whose answer is unknown tells nothing
		}
		ret = math.MaxInt64
	}
	r.ops = append(r.ops, porcupine.Operation{ClientId: c.id, Input: in, Output: out, Call: call, Return: ret})
	if in.Kind != Get {
		// Each lost reply is an attempt that may have been applied, at
		// any time after the call was sent, before the attempt that
		// answered.
		for range lost {
			r.ops = append(r.ops, porcupine.Operation{ClientId: r.cfg.Clients + c.id, Input: in,
				Output: Output{Outcome: Unknown}, Call: call, Return: math.MaxInt64})
		}
	}
	r.stats.recorded = len(r.ops)
}

// outcomeName names a call's outcome for the statistics.
func outcomeName(in Input, out Output) string {
	switch out.Outcome {
	case LeaseLost:
		return in.Kind.String() + ":lease-lost"
	case NotFound:
		return in.Kind.String() + ":not-found"
	case Unknown:
		return in.Kind.String() + ":unknown"
	}
	switch {
	case in.Kind == Claim && !out.Acquired:
		return "Claim:held"
	case in.Kind == Claim && in.reused:
		return "Claim:acquired-with-a-claimed-token"
	case in.Kind == Claim:
		return "Claim:acquired-with-a-new-token"
	}
	return in.Kind.String() + ":ok"
}
