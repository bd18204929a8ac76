package e2e

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log"
	"math/rand/v2"
	"net"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambda-dedupe/dedupe/infra"
	"github.com/lambda-dedupe/dedupe/localtest/dynalite"
	"github.com/lambda-dedupe/dedupe/localtest/gateway"
)

// The chaos run (issue 10): payments through a stack of real runtime
// processes, with client retries, bursts of concurrent duplicates, every
// failing test token, several callers reusing each other's keys, and one
// restart of the DynamoDB endpoint in the middle; then a reconciliation
// of what the clients saw against the payments table.
//
// DEDUPE_CHAOS_REQUESTS sets roughly how many requests it sends;
// DEDUPE_CHAOS_SEED replays a mix (the interleaving is not seeded).
//
// The default, chaosDefaultRequests, is sized for power, not volume: every
// kind of request (each test token, a burst, a retry, a key another caller
// used) is in every mix (chaosIntents makes sure of it), 12 clients keep 8
// environments busy, and the restart falls mid-run. What a larger run adds
// is more of the same interleavings; set DEDUPE_CHAOS_REQUESTS=2000 for a
// soak.
const (
	chaosDefaultRequests = 250
	chaosConcurrency     = 12 // client goroutines
	chaosEnvironments    = 8  // execution environments of the chaos stack
)

// chaosCallers are the IAM callers; every request is signed by one of them.
var chaosCallers = []string{"alice", "bob", "carol", "dave"}

// intent is one payment a caller means to make once: one caller, one key,
// one body. Retries and duplicates resend it unchanged. Amounts are unique
// across the run, so a payment row, or a payment in a response body, names
// its intent.
type intent struct {
	caller string
	key    string
	charge charge
	burst  int  // concurrent copies of the first attempt (1: none)
	retry  bool // the client retries once after its answer

	mu      sync.Mutex
	replies []reply
}

func (in *intent) headers() map[string]string {
	return map[string]string{"Idempotency-Key": in.key, "Authorization": signedBy(in.caller)}
}

// chaosStack is a stack of its own on a DynamoDB endpoint that keeps its
// data on disk, so that a restart is an outage, not a wipe.
type chaosStack struct {
	db     *dynalite.Server
	client *dynamodb.Client
	stack  *gateway.Stack
	url    string
	output *logBuffer
}

// onDiskDynalite returns an executable that runs the installed dynalite
// the way [dynalite.Start] does (node and localtest/dynalite/serve.js, so
// that a runtime killed mid-request does not end the server), keeping its
// tables in a directory of t's: dynalite keeps them on disk with --path,
// which the server package does not pass.
func onDiskDynalite(t *testing.T) string {
	t.Helper()
	root, err := infra.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	script := filepath.Join(dir, "dynalite")
	serve := filepath.Join(root, "localtest", "dynalite", "serve.js")
	body := fmt.Sprintf("#!/bin/sh\nexec %q %q --path %q \"$@\"\n", node, serve, filepath.Join(dir, "data"))
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return script
}

func startChaosStack(t *testing.T) *chaosStack {
	t.Helper()
	// dynalite.Start has a generous limit of its own.
	ctx := context.Background()
	cs := &chaosStack{output: &logBuffer{}}
	var err error
	if cs.db, err = dynalite.Start(ctx, dynalite.Options{Bin: onDiskDynalite(t)}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.db.Stop() })
	cs.client = dynamoClientOf(cs.db.Endpoint())
	if _, err := infra.EnsureTables(ctx, cs.client, tables); err != nil {
		t.Fatal(err)
	}
	cs.stack, err = gateway.NewStack(gateway.StackConfig{
		Functions:      functions,
		BootstrapDir:   bootstrapDir,
		RIE:            riePath,
		Env:            map[string]string{dynalite.EnvEndpoint: cs.db.Endpoint()},
		MaxConcurrency: chaosEnvironments,
		QueueTimeout:   queueTimeout,
		Output:         cs.output,
		Logger:         log.New(cs.output, "", log.Lmicroseconds),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.stack.Close() })
	srv := httptest.NewServer(cs.stack.Gateway)
	t.Cleanup(srv.Close)
	cs.url = srv.URL
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("chaos stack output:\n%s", cs.output)
		}
	})
	return cs
}

// chaosEveryFailure are the failing test tokens every mix holds at least
// once (tok_timeout, which costs 10 s, comes once per 300 requests).
var chaosEveryFailure = []string{"tok_chargeDeclined", "tok_processorError", "tok_panic", "tok_slow"}

// chaosIntents draws the mix for about n requests.
func chaosIntents(rng *rand.Rand, n int) []*intent {
	var out []*intent
	used := map[string][]string{} // key -> callers that used it
	var keys []string
	requests := 0
	timeouts := max(1, n/300) // 10 s each: a few only
	for requests < n {
		in := &intent{caller: chaosCallers[rng.IntN(len(chaosCallers))], burst: 1}
		// A quarter reuse a key another caller already used.
		if len(keys) > 0 && rng.IntN(4) == 0 {
			k := keys[rng.IntN(len(keys))]
			if !slices.Contains(used[k], in.caller) {
				in.key = k
			}
		}
		if in.key == "" {
			in.key = newKey()
			keys = append(keys, in.key)
		}
		used[in.key] = append(used[in.key], in.caller)
		source := "tok_visa"
		switch p := rng.IntN(100); {
		case len(out) < len(chaosEveryFailure):
			// Each failing token at least once, whatever the size.
			source = chaosEveryFailure[len(out)]
		case timeouts > 0 && len(out)%97 == 50:
			source = "tok_timeout"
			timeouts--
		case p < 8:
			source = "tok_chargeDeclined"
		case p < 14:
			source = "tok_processorError"
		case p < 18:
			source = "tok_panic"
		case p < 20:
			source = "tok_slow"
		}
		in.charge = newCharge(source)
		// The first intents include a burst and a retry of a success.
		if rng.IntN(10) == 0 || len(out) == len(chaosEveryFailure) {
			in.burst = 5
		}
		in.retry = source == "tok_timeout" || rng.IntN(10) < 3 || len(out) == len(chaosEveryFailure)+1
		requests += in.burst
		if in.retry {
			requests++
		}
		out = append(out, in)
	}
	return out
}

// attempt sends in's request until it gets an answer a client would stop
// at: transient answers (503 store unavailable, 429, a transport error)
// and 409 in progress are retried, a bounded number of times. Every
// answer is recorded.
func (in *intent) attempt(url string, mix *statusMix) {
	for try := 0; try < 40; try++ {
		r, err := sendTo(url, "POST", "/payments", in.charge.JSON(), in.headers())
		if err != nil {
			mix.add("transport error")
			time.Sleep(100 * time.Millisecond)
			continue
		}
		mix.add(in.cause(r))
		in.mu.Lock()
		in.replies = append(in.replies, r)
		in.mu.Unlock()
		switch {
		case r.status == 503 || r.status == 429:
			time.Sleep(time.Duration(50*(try+1)) * time.Millisecond)
		case r.status == 409 && in.charge.Source != "tok_timeout" && strings.HasSuffix(problemOf(r).Type, ":request-in-progress"):
			time.Sleep(300 * time.Millisecond)
		default:
			return
		}
	}
}

// cause names what an answer to in is, by its status, its problem type
// and in's test token: every answer of the run is one of these, each a
// documented status (functions/api/internal/payments, docs/http.md), or
// it is named "undocumented" and fails the run (issue 29, item 8: the
// 502s a client cannot place). The 502s are the API's own answer to
// tok_processorError: a problem document saying nothing was charged; the
// 500s are a handler that panicked (tok_panic) or ran out of time
// (tok_timeout), before anything was charged, with the key released or
// held until its lease ends.
func (in *intent) cause(r reply) string {
	p := problemOf(r)
	tag := func(suffix string) bool { return strings.HasSuffix(p.Type, suffix) }
	status := strconv.Itoa(r.status)
	switch src := in.charge.Source; {
	case r.status == 201 || r.status == 402:
		return status + map[bool]string{true: " replayed"}[r.replayed()]
	case r.status == 409 && tag(":request-in-progress"):
		return "409 in progress"
	case r.status == 409 && tag(":response-unavailable"):
		return "409 response unavailable"
	case r.status == 503 && tag(":store-unavailable"):
		return "503 store unavailable"
	case r.status == 503 && tag(":response-unreadable"):
		return "503 response unreadable"
	case r.status == 503 && tag(":payments/unavailable"):
		return "503 payments table unavailable"
	case r.status == 502 && tag(":payments/processor-error") && src == "tok_processorError":
		return "502 processor error, nothing charged (tok_processorError)"
	case r.status == 500 && p.Type == "" && src == "tok_panic":
		return "500 handler panicked, nothing charged (tok_panic)"
	case (r.status == 500 || r.status == 503) && p.Type == "" && src == "tok_timeout":
		return status + " invocation timed out (tok_timeout)"
	case r.status == 429:
		return "429 throttled"
	}
	return fmt.Sprintf("undocumented %d %s (%s): %.120s", r.status, p.Type, in.charge.Source, r.body)
}

// statusMix counts answers by status.
type statusMix struct {
	mu sync.Mutex
	n  map[string]int
}

func (m *statusMix) add(s string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.n == nil {
		m.n = map[string]int{}
	}
	m.n[s]++
}

// counts returns a copy of the counts by label.
func (m *statusMix) counts() map[string]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]int, len(m.n))
	for k, v := range m.n {
		out[k] = v
	}
	return out
}

func (m *statusMix) total() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, v := range m.n {
		n += v
	}
	return n
}

func (m *statusMix) String() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var parts []string
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range m.n {
			if !yield(k) {
				return
			}
		}
	}) {
		parts = append(parts, fmt.Sprintf("%s: %d", k, m.n[k]))
	}
	return strings.Join(parts, ", ")
}

// paymentOf returns the payment a 201 or 402 answer carries.
func paymentOf(r reply) (payment, bool) {
	var p payment
	switch r.status {
	case 201:
		return p, json.Unmarshal(r.body, &p) == nil && p.ID != ""
	case 402:
		var prob struct {
			Payment payment `json:"payment"`
		}
		return prob.Payment, json.Unmarshal(r.body, &prob) == nil && prob.Payment.ID != ""
	}
	return p, false
}

func TestChaos(t *testing.T) {
	needStack(t)
	n := chaosDefaultRequests
	if v := os.Getenv("DEDUPE_CHAOS_REQUESTS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			t.Fatalf("DEDUPE_CHAOS_REQUESTS=%q: want a positive number", v)
		}
	}
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("DEDUPE_CHAOS_SEED"); v != "" {
		seed, _ = strconv.ParseUint(v, 10, 64)
	}
	t.Logf("chaos: seed %d (DEDUPE_CHAOS_SEED), about %d requests (DEDUPE_CHAOS_REQUESTS)", seed, n)
	cs := startChaosStack(t)
	intents := chaosIntents(rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), n)

	var mix statusMix
	var restartErr error
	var restarted sync.WaitGroup
	var dispatched atomic.Int64
	work := make(chan *intent)
	var wg sync.WaitGroup
	began := time.Now()
	for range chaosConcurrency {
		wg.Go(func() {
			for in := range work {
				if dispatched.Add(1) == int64(len(intents)/2) {
					// Mid-run: the endpoint goes away and comes back with
					// its data; requests meanwhile get 503 and retry.
					restarted.Go(func() { restartErr = cs.db.Restart(context.Background()) })
				}
				var burst sync.WaitGroup
				for range in.burst {
					burst.Go(func() { in.attempt(cs.url, &mix) })
				}
				burst.Wait()
				if in.retry {
					in.attempt(cs.url, &mix)
				}
			}
		})
	}
	for _, in := range intents {
		work <- in
	}
	close(work)
	wg.Wait()
	restarted.Wait()
	elapsed := time.Since(began)
	if restartErr != nil {
		t.Fatalf("restart the DynamoDB endpoint: %v", restartErr)
	}
	requests := mix.total()

	// Reconcile. The rows of the payments table, by amount.
	rows := map[int][]payment{}
	var start map[string]types.AttributeValue
	for range 10_000 {
		out, err := cs.client.Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(tableName("PaymentsTable")), ExclusiveStartKey: start, ConsistentRead: aws.Bool(true)})
		if err != nil {
			t.Fatalf("scan payments: %v", err)
		}
		for _, item := range out.Items {
			var p payment
			p.ID = item["id"].(*types.AttributeValueMemberS).Value
			p.Amount, _ = strconv.Atoi(item["amount"].(*types.AttributeValueMemberN).Value)
			p.Source = item["source"].(*types.AttributeValueMemberS).Value
			p.Status = item["status"].(*types.AttributeValueMemberS).Value
			rows[p.Amount] = append(rows[p.Amount], p)
		}
		if start = out.LastEvaluatedKey; len(start) == 0 {
			break
		}
	}
	byAmount := map[int]*intent{}
	for _, in := range intents {
		byAmount[in.charge.Amount] = in
	}
	var (
		rowCount, orphanRows, chargedTwice, wrongOwner, reused422, replayable, notReplayable, unrecorded, twoAnswers, inWindow, retaken int
	)
	// Requests whose result the guard could not record (the outage).
	notStored := strings.Count(cs.output.String(), `"outcome":"not_stored"`)
	fail := func(limit *int, format string, args ...any) {
		if *limit++; *limit <= 5 {
			t.Errorf(format, args...)
		}
	}
	var failures int
	for amount, ps := range rows {
		rowCount += len(ps)
		in := byAmount[amount]
		switch {
		case in == nil:
			orphanRows++
			fail(&failures, "payment row %s of amount %d belongs to no request", ps[0].ID, amount)
		case len(ps) > 1:
			chargedTwice++
			fail(&failures, "caller %s key %s: %d payment rows, want at most 1", in.caller, in.key, len(ps))
		case ps[0].Source != in.charge.Source:
			fail(&failures, "payment row %s: source %s, want %s", ps[0].ID, ps[0].Source, in.charge.Source)
		}
	}
	for _, in := range intents {
		// The 5xx answers say nothing was charged: check it.
		if src := in.charge.Source; (src == "tok_processorError" || src == "tok_panic") && len(rows[in.charge.Amount]) > 0 {
			fail(&failures, "caller %s key %s: %s answered that nothing was charged, but a payment row exists", in.caller, in.key, src)
		}
		var first, takeover *reply // the first 201, and the takeover's after an unrecorded one
		taken := false
		for i := range in.replies {
			r := in.replies[i]
			if r.status == 422 {
				reused422++
				fail(&failures, "caller %s key %s: 422, but nobody else used this key in this scope", in.caller, in.key)
			}
			p, ok := paymentOf(r)
			if !ok {
				continue
			}
			if p.Amount != in.charge.Amount {
				wrongOwner++
				fail(&failures, "caller %s key %s: got the payment of amount %d, want %d: someone else's response", in.caller, in.key, p.Amount, in.charge.Amount)
			}
			if r.status == 201 {
				fp, _ := paymentOf(*cmp.Or(first, &r))
				switch {
				case first == nil:
					first = &in.replies[i]
				case sameReply(*first, r), taken && sameReply(*takeover, r):
				case !taken && fp.ID == p.ID && retaken+inWindow < notStored:
					// The documented window, once its lease ran out: the
					// store was down when the charge finished, so its 201
					// went out unrecorded (outcome not_stored); a retry
					// after the lease took the key over, and the demo's
					// processor, deduplicating on the claim's downstream
					// key, answered the same payment again (with its own
					// created time). One charge, two bodies.
					taken, takeover = true, &in.replies[i]
					retaken++
				default:
					twoAnswers++
					fail(&failures, "caller %s key %s: two different 201 answers %s and %s", in.caller, in.key, first.body, r.body)
				}
			}
		}
		if first == nil {
			continue
		}
		p, _ := paymentOf(*first)
		if ps := rows[in.charge.Amount]; len(ps) == 0 {
			unrecorded++ // charged, row lost in the outage: the API logs it for reconciliation
		} else if ps[0].ID != p.ID {
			fail(&failures, "caller %s key %s: answered payment %s, but the row is %s", in.caller, in.key, p.ID, ps[0].ID)
		}
		// Every 2xx the client saw is replayable, byte for byte.
		var again reply
		for try := 0; try < 20; try++ {
			var err error
			if again, err = sendTo(cs.url, "POST", "/payments", in.charge.JSON(), in.headers()); err == nil && again.status != 503 {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		switch {
		case again.replayed() && sameReply(*first, again):
			replayable++
		case taken && again.replayed() && sameReply(*takeover, again):
			replayable++ // the takeover's answer is the one recorded
		case !taken && again.status == 201 && retaken+inWindow < notStored && func() bool { ap, ok := paymentOf(again); return ok && ap.ID == p.ID }():
			// The same window, met by this replay itself: past the
			// lease it took the key over and got the same payment.
			retaken++
		case again.status == 409 && inWindow < notStored:
			// The documented window: the store was down when the charge
			// finished, so its 201 went out unrecorded (outcome
			// not_stored in the guard's event) and the key stays in
			// flight until its lease ends. The demo's processor
			// deduplicates on the claim's downstream key for what a
			// retry after that would do.
			inWindow++
		default:
			notReplayable++
			fail(&failures, "caller %s key %s: replay got %d %s, want %s", in.caller, in.key, again.status, again.body, first.body)
		}
	}
	if unrecorded > 0 && !strings.Contains(cs.output.String(), "card charged but payment not recorded") {
		t.Errorf("%d charges answered 201 have no payment row, and the API logged none for reconciliation", unrecorded)
	}
	s := cs.stack.Pool("ApiFunction").Stats()
	t.Logf(`chaos run:
  requests           %d in %v (%.0f req/s), %d payment intents by %d callers, 1 DynamoDB restart
  answers by cause   %s
  environments       %d started, %d replaced, %d throttled
  payment rows       %d: %d without a request, %d keys charged twice
  2xx replayable     %d of %d byte for byte; %d answered while the store was down, not recorded (in flight until the lease ends), %d of them retaken after the lease with the same payment
  wrong owner        %d responses carried another caller's payment; %d scope leaks (422)
  unrecorded         %d charges answered but without a row (logged for reconciliation)`,
		requests, elapsed.Round(time.Millisecond), float64(requests)/elapsed.Seconds(), len(intents), len(chaosCallers),
		mix.String(),
		s.Started, s.Replaced, s.Throttled,
		rowCount, orphanRows, chargedTwice,
		replayable, replayable+notReplayable+inWindow, inWindow+retaken, retaken,
		wrongOwner, reused422,
		unrecorded)
	if twoAnswers > 0 {
		t.Errorf("%d keys got two different 201 answers", twoAnswers)
	}
	for label, n := range mix.counts() {
		if strings.HasPrefix(label, "undocumented") {
			t.Errorf("%d answers a client cannot place: %s", n, label)
		}
	}
}

// TestChaosDynaliteSurvivesADroppedRequest: the chaos stack's on-disk
// dynalite, like the one dynalite.Start runs, stays up when a client drops
// its connection mid-request (a runtime killed at its timeout while it
// sends one); dynalite 4.0.0 alone exited, and the chaos run met an outage
// it had not planned. It needs no stack, so it runs with -short too.
func TestChaosDynaliteSurvivesADroppedRequest(t *testing.T) {
	out := &logBuffer{}
	db, err := dynalite.Start(context.Background(), dynalite.Options{Bin: onDiskDynalite(t), Output: out})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Stop() })
	conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", db.Port()))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprint(conn, "POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-amz-json-1.0\r\n"+
		"X-Amz-Target: DynamoDB_20120810.ListTables\r\nContent-Length: 1000\r\n\r\n{\"Lim")
	_ = conn.(*net.TCPConn).SetLinger(0)
	conn.Close()
	// Until the server says it discarded the request, or exits.
	for !strings.Contains(out.String(), "dropped its connection mid-request") {
		if db.Stopped() {
			t.Fatalf("dynalite exited after a client dropped its connection mid-request:\n%s", out)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := dynamoClientOf(db.Endpoint()).ListTables(context.Background(), &dynamodb.ListTablesInput{}); err != nil {
		t.Fatalf("ListTables after a dropped request: %v", err)
	}
}
