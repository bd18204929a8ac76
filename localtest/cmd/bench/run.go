package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/lambda-dedupe/dedupe/infra"
	"github.com/lambda-dedupe/dedupe/localtest/dynalite"
	"github.com/lambda-dedupe/dedupe/localtest/moto"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/dynamostore"
	"github.com/lambda-dedupe/dedupe/pkg/memstore"
)

// Report is everything one run measured; bench.json holds it.
type Report struct {
	When      time.Time   `json:"when"`
	Server    string      `json:"server"`
	InProcess []InProcess `json:"inProcess"`
	Latency   []Latency   `json:"latency"`
	// OverFloor is a guarded fresh request's extra latency (p50 over the
	// bare handler's) divided by the p50 of the two raw writes it makes.
	OverFloor float64 `json:"overFloor"`
	// ReplayOverFloor is a guarded replay's extra latency (p50 over the
	// bare handler's) divided by the p50 of the raw calls it makes: the
	// claim's conditional UpdateItem failing on the completed record,
	// and, on a server that does not return the item with the failure
	// (dynalite), the GetItem that reads it.
	ReplayOverFloor float64 `json:"replayOverFloor"`
	Waited          Waited  `json:"waited"`
	Moto            string  `json:"moto"`
	Stack           Stack   `json:"stack"`

	// Waits are the duplicates that wait, for 50 ms, 1 s and 5 s handlers.
	Waits []WaitRun `json:"waits"`
	// Capacity is the DynamoDB capacity units per request (capacity.go).
	Capacity []Capacity `json:"capacity"`
	Check    CheckCost  `json:"globalTableCheck"`
}

// InProcess is one testing.Benchmark result.
type InProcess struct {
	Name     string  `json:"name"`
	NsPerOp  float64 `json:"nsPerOp"`
	AllocsOp int64   `json:"allocsPerOp"`
}

// Latency is one scenario against the DynamoDB endpoint.
type Latency struct {
	Name        string  `json:"name"`
	P50ms       float64 `json:"p50ms"`
	P99ms       float64 `json:"p99ms"`
	PerSecond   float64 `json:"perSecond"`
	CallsPerReq float64 `json:"callsPerRequest"`
}

// Waited is the waiting-duplicates scenario.
type Waited struct {
	Requests      int `json:"requests"`
	Replays       int `json:"replays"`
	Conflicts     int `json:"conflicts"`
	MaxExtraReads int `json:"maxExtraReads"`
}

// scale is how much each scenario of a run does.
type scale struct {
	// N is the requests per latency scenario.
	N int
	// Concurrent is the requests on one key of the waiting scenarios.
	Concurrent int
	// WaitHandlers are the handler durations the waiting scenarios run.
	WaitHandlers []time.Duration
	// StackLevels are the client counts through the local stack, with
	// PerClient requests per client and kind.
	StackLevels []int
	PerClient   int
	// BenchTime is testing.Benchmark's -test.benchtime for the
	// in-process figures.
	BenchTime string
}

// full is `make bench`; short1 (-short) runs every scenario at a few
// requests each, so that `make test` runs the bench (TestShort) and a
// bench that panics or fails fails there, not in a user's hands.
var (
	full   = scale{N: 300, Concurrent: 100, WaitHandlers: []time.Duration{50 * time.Millisecond, time.Second, 5 * time.Second}, StackLevels: []int{1, 4, 8}, PerClient: 40, BenchTime: "1s"}
	short1 = scale{N: 5, Concurrent: 5, WaitHandlers: []time.Duration{50 * time.Millisecond}, StackLevels: []int{2}, PerClient: 2, BenchTime: "20x"}
)

func run(ctx context.Context, outDir string, sc scale, w io.Writer) error {
	rep := Report{When: time.Now().UTC()}
	rep.InProcess = inProcess(sc.BenchTime)

	endpoint := os.Getenv("AWS_ENDPOINT_URL_DYNAMODB")
	rep.Server = endpoint
	if endpoint == "" {
		srv, err := dynalite.Start(ctx, dynalite.Options{})
		if err != nil {
			return fmt.Errorf("start dynalite: %w", err)
		}
		defer srv.Stop()
		endpoint, rep.Server = srv.Endpoint(), "dynalite (started by bench)"
	}
	calls := &counter{}
	client := newClient(endpoint, calls)
	table, err := createTable(ctx, client, "ref")
	if err != nil {
		return err
	}
	if rep.Latency, rep.OverFloor, rep.ReplayOverFloor, err = latencies(ctx, client, calls, table, sc.N); err != nil {
		return err
	}
	if rep.Waited, err = waited(ctx, client, table, sc.Concurrent); err != nil {
		return err
	}
	if rep.Waits, err = waits(ctx, client, table, sc); err != nil {
		return err
	}
	classic, err := createTable(ctx, client, "classic")
	if err != nil {
		return err
	}
	if rep.Capacity, err = capacityUnits(ctx, client, table, classic); err != nil {
		return fmt.Errorf("capacity units: %w", err)
	}
	if rep.Check, err = checkCost(client, table); err != nil {
		return fmt.Errorf("global-table check: %w", err)
	}
	rep.Moto = motoReplay(ctx)
	if rep.Stack, err = stack(ctx, endpoint, client, sc); err != nil {
		return fmt.Errorf("local stack: %w", err)
	}

	print(w, rep)
	printCapacity(w, rep.Capacity, rep.Check)
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return err
	}
	b, _ := json.MarshalIndent(rep, "", "  ")
	if err := os.WriteFile(filepath.Join(outDir, "bench.json"), b, 0o644); err != nil {
		return err
	}
	if err := chart(rep, filepath.Join(outDir, "bench.png")); err != nil {
		return fmt.Errorf("chart: %w", err)
	}
	fmt.Fprintf(w, "\nwrote %s and %s\n", filepath.Join(outDir, "bench.json"), filepath.Join(outDir, "bench.png"))
	return nil
}

// counter counts DynamoDB API calls made through a client.
type counter struct{ n atomic.Int64 }

func (c *counter) option(o *dynamodb.Options) {
	o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error {
		return s.Initialize.Add(middleware.InitializeMiddlewareFunc("count", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			c.n.Add(1)
			return next.HandleInitialize(ctx, in)
		}), middleware.After)
	})
}

func newClient(endpoint string, calls *counter) *dynamodb.Client {
	return dynamodb.New(dynamodb.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(endpoint),
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "x", SecretAccessKey: "x", Source: "bench"}, nil
		}),
	}, calls.option)
}

// createTable creates template.yaml's IdempotencyTable under a fresh name,
// with its IdempotencyTableKeySchema set to schema (ref or classic).
func createTable(ctx context.Context, c *dynamodb.Client, schema string) (string, error) {
	path, err := infra.FindTemplate()
	if err != nil {
		return "", err
	}
	name := "bench-" + schema + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	tpl, err := infra.LoadWithOptions(path, &infra.Options{Names: map[string]string{"IdempotencyTable": name},
		Parameters: map[string]string{"IdempotencyTableKeySchema": schema}})
	if err != nil {
		return "", err
	}
	all, err := infra.Tables(tpl)
	if err != nil {
		return "", err
	}
	i := slices.IndexFunc(all, func(t infra.Table) bool { return t.LogicalID == "IdempotencyTable" })
	if i < 0 {
		return "", errors.New("template.yaml declares no IdempotencyTable")
	}
	if _, err := infra.EnsureTables(ctx, c, all[i:i+1]); err != nil {
		return "", fmt.Errorf("create table: %w", err)
	}
	return name, nil
}

// request is the event every scenario sends, with key set per request.
func request(key string) events.APIGatewayV2HTTPRequest {
	return events.APIGatewayV2HTTPRequest{
		RouteKey: "POST /payments", RawPath: "/payments",
		Headers: map[string]string{"idempotency-key": key, "content-type": "application/json"},
		Body:    `{"amount":1250,"currency":"EUR","source":"tok_visa"}`,
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			APIID: "bench", Stage: "$default", RouteKey: "POST /payments",
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "POST"},
			Authorizer: &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
				JWT: &events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription{Claims: map[string]string{"iss": "https://issuer", "sub": "alice"}},
			},
		},
	}
}

type handler = func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error)

func bare(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	return events.APIGatewayV2HTTPResponse{StatusCode: 201, Headers: map[string]string{"Content-Type": "application/json"},
		Body: `{"id":"pay_1","amount":1250,"currency":"EUR","status":"succeeded"}`}, nil
}

// inProcess measures the adapter and guard over memstore, each figure for
// benchtime (testing's -test.benchtime: a duration, or a count such as
// "20x").
func inProcess(benchtime string) []InProcess {
	if flag.Lookup("test.benchtime") == nil {
		testing.Init() // a command: register testing's flags to set one
	}
	if err := flag.Set("test.benchtime", benchtime); err != nil {
		panic(fmt.Sprintf("bench: benchtime %q: %v", benchtime, err))
	}
	mk := func(cache bool) handler {
		cfg := &dedupe.Config{Prefix: "bench"}
		if cache {
			cfg.Cache = dedupe.NewCache(0, 0)
		}
		return dedupe.HTTPAPI(dedupe.New(memstore.New(), cfg), nil, bare)
	}
	bench := func(name string, f func(b *testing.B)) InProcess {
		r := testing.Benchmark(f)
		return InProcess{Name: name, NsPerOp: float64(r.T.Nanoseconds()) / float64(r.N), AllocsOp: r.AllocsPerOp()}
	}
	ctx := context.Background()
	return []InProcess{
		bench("bare handler", func(b *testing.B) {
			req := request("k")
			b.ReportAllocs()
			for b.Loop() {
				bare(ctx, req)
			}
		}),
		bench("fresh (memstore)", func(b *testing.B) {
			h := mk(false)
			reqs := make([]events.APIGatewayV2HTTPRequest, b.N)
			for i := range reqs {
				reqs[i] = request("k-" + strconv.Itoa(i))
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				h(ctx, reqs[i])
			}
		}),
		bench("replay (memstore)", func(b *testing.B) {
			h := mk(false)
			req := request("k")
			h(ctx, req)
			b.ReportAllocs()
			for b.Loop() {
				h(ctx, req)
			}
		}),
		bench("cached replay", func(b *testing.B) {
			h := mk(true)
			req := request("k")
			h(ctx, req)
			b.ReportAllocs()
			for b.Loop() {
				h(ctx, req)
			}
		}),
	}
}

// scenario is one row of the latency table: a handler, and the request
// it gets at step i.
type scenario struct {
	name string
	h    handler
	next func(i int) events.APIGatewayV2HTTPRequest
}

// measure sends n requests of each scenario, one at a time, and returns
// their latency figures and calls per request, in the scenarios' order.
// Scenarios measured together run side by side: step i sends request i of
// each, in an order that rotates with i, so that a change of the
// machine's load, or a server that slows as its table grows, falls on
// each alike. That is how a guarded request and its floor are compared:
// measured one after the other, their ratio moved with whatever else the
// machine did in between. Only the handler's call is timed (PerSecond
// counts that time too), never the making of its request.
func measure(ctx context.Context, n int, calls *counter, ss ...scenario) []Latency {
	lat := make([][]time.Duration, len(ss))
	busy := make([]time.Duration, len(ss))
	made := make([]int64, len(ss))
	for i := range n {
		for j := range ss {
			k := (i + j) % len(ss)
			req := ss[k].next(i)
			before := calls.n.Load()
			t := time.Now()
			ss[k].h(ctx, req)
			d := time.Since(t)
			made[k] += calls.n.Load() - before
			lat[k] = append(lat[k], d)
			busy[k] += d
		}
	}
	out := make([]Latency, len(ss))
	for k, sc := range ss {
		slices.Sort(lat[k])
		out[k] = Latency{
			Name:        sc.name,
			P50ms:       ms(lat[k][n/2]),
			P99ms:       ms(lat[k][min(n-1, n*99/100)]),
			PerSecond:   float64(n) / busy[k].Seconds(),
			CallsPerReq: float64(made[k]) / float64(n),
		}
	}
	return out
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// latencies runs the scenarios against the endpoint, all in this run.
func latencies(ctx context.Context, c *dynamodb.Client, calls *counter, table string, n int) ([]Latency, float64, float64, error) {
	store, err := dynamostore.New(c, dynamostore.Options{Table: table})
	if err != nil {
		return nil, 0, 0, err
	}
	guarded := func(cfg *dedupe.Config) handler {
		c := dedupe.Config{}
		if cfg != nil {
			c = *cfg
		}
		c.Prefix = "bench" // outside Lambda a prefix is required
		return dedupe.HTTPAPI(dedupe.New(store, &c), nil, bare)
	}
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	keyed := func(prefix string) func(int) events.APIGatewayV2HTTPRequest {
		return func(i int) events.APIGatewayV2HTTPRequest { return request(prefix + run + "-" + strconv.Itoa(i)) }
	}
	same := func(key string) func(int) events.APIGatewayV2HTTPRequest {
		return func(int) events.APIGatewayV2HTTPRequest { return request(key + run) }
	}

	var out []Latency
	out = append(out, measure(ctx, n, calls, scenario{"bare handler", bare, keyed("b")})...)
	// The floors send, by hand, the very requests a guarded request
	// sent, captured from one through a second store on a recording
	// client: the same expressions, a key of the same length, a record of
	// the same size. Their difference from the guarded rows is then what
	// the guard, the adapter and the store add, not a shorter key or a
	// smaller item. A floor whose calls fail (or, the replay's claim,
	// succeed) would be no floor: the first such call fails the run.
	var floorErr error
	floorFailed := func(err error) {
		if err != nil && floorErr == nil {
			floorErr = fmt.Errorf("a floor's raw call failed: %w", err)
		}
	}
	rec := &recording{Client: c}
	recStore, err := dynamostore.New(rec, dynamostore.Options{Table: table})
	if err != nil {
		return nil, 0, 0, err
	}
	recorded := dedupe.HTTPAPI(dedupe.New(recStore, &dedupe.Config{Prefix: "bench"}), nil, bare)
	// storeKey is the stored key of a request's record, as the guard
	// derives it.
	storeKey := func(req events.APIGatewayV2HTTPRequest) string {
		ek, err := dedupe.KeyOfEvent(nil, req)
		floorFailed(err)
		return dedupe.StoreKey("bench", ek.Scoped)
	}
	recorded(ctx, request("capture"+run))
	fresh := rec.take()
	if len(fresh) != 2 || fresh[0].update == nil || fresh[1].update == nil {
		return nil, 0, 0, fmt.Errorf("a guarded fresh request sent %d calls, not the claim's and the completion's UpdateItem: the floor cannot be built", len(fresh))
	}
	raw := func(_ context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		k := rawKeyOf(storeKey(req))
		for _, call := range fresh {
			in := *call.update
			in.Key = k
			_, err := c.UpdateItem(ctx, &in)
			floorFailed(err)
		}
		return bare(ctx, req)
	}
	out = append(out, measure(ctx, n, calls,
		scenario{"two raw writes (floor)", raw, keyed("r")},
		scenario{"guarded fresh", guarded(nil), keyed("f")})...)
	h := guarded(nil)
	h(ctx, same("replay")(0))
	// The replay's floor: the calls a guarded replay of the same record
	// sends (the claim's UpdateItem, failing on the completed record,
	// and, on a server that ignores ALL_OLD such as dynalite, the
	// strongly consistent GetItem that reads it), sent again on it.
	recorded(ctx, same("replay")(0))
	replay := rec.take()
	if len(replay) == 0 || replay[0].update == nil {
		return nil, 0, 0, errors.New("a guarded replay sent no claim: the floor cannot be built")
	}
	rawReplay := func(_ context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		var ccf *types.ConditionalCheckFailedException
		for _, call := range replay {
			switch {
			case call.update != nil:
				if _, err := c.UpdateItem(ctx, call.update); !errors.As(err, &ccf) {
					floorFailed(fmt.Errorf("the replay floor's claim did not fail on the completed record: %v", err))
				}
			case call.get != nil:
				_, err := c.GetItem(ctx, call.get)
				floorFailed(err)
			}
		}
		return bare(ctx, req)
	}
	out = append(out, measure(ctx, n, calls,
		scenario{"guarded replay, cache off", h, same("replay")},
		scenario{"raw failed claim (replay floor)", rawReplay, same("replay")})...)
	hc := guarded(&dedupe.Config{Cache: dedupe.NewCache(0, 0)})
	hc(ctx, same("cached")(0))
	out = append(out, measure(ctx, n, calls, scenario{"guarded replay, cache on", hc, same("cached")})...)
	// A conflict: the key is held in flight by an owner that waits until
	// the scenario is over.
	hold := "held" + run
	g := dedupe.New(store, &dedupe.Config{Prefix: "bench"})
	release, held, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		dedupe.HTTPAPI(g, nil, func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
			close(held)
			<-release
			return bare(ctx, request(hold))
		})(ctx, request(hold))
	}()
	<-held
	out = append(out, measure(ctx, n, calls, scenario{"conflict (409)", guarded(nil), func(int) events.APIGatewayV2HTTPRequest { return request(hold) }})...)
	close(release)
	<-done
	if floorErr != nil {
		return nil, 0, 0, floorErr
	}

	byName := map[string]Latency{}
	for _, l := range out {
		byName[l.Name] = l
	}
	// A floor is the guarded request's own calls: one that made another
	// number of calls measures something else.
	for guard, floor := range map[string]string{"guarded fresh": "two raw writes (floor)", "guarded replay, cache off": "raw failed claim (replay floor)"} {
		if g, f := byName[guard].CallsPerReq, byName[floor].CallsPerReq; g != f {
			return nil, 0, 0, fmt.Errorf("%s made %.2f calls per request, its floor %.2f: the floor does not send what the guard sent", guard, g, f)
		}
	}
	floor := byName["two raw writes (floor)"].P50ms - byName["bare handler"].P50ms
	over := 0.0
	if floor > 0 {
		over = (byName["guarded fresh"].P50ms - byName["bare handler"].P50ms) / floor
	}
	replayOver := 0.0
	if rf := byName["raw failed claim (replay floor)"].P50ms - byName["bare handler"].P50ms; rf > 0 {
		replayOver = (byName["guarded replay, cache off"].P50ms - byName["bare handler"].P50ms) / rf
	}
	return out, over, replayOver, nil
}

// waited sends n concurrent requests on one key, whose handler takes
// 50 ms, through guards with Config.Wait.
func waited(ctx context.Context, c *dynamodb.Client, table string, n int) (Waited, error) {
	store, err := dynamostore.New(c, dynamostore.Options{Table: table})
	if err != nil {
		return Waited{}, err
	}
	key := "wait-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	var mu sync.Mutex
	res := Waited{Requests: n}
	var runs atomic.Int32
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var ev dedupe.Event
			g := dedupe.New(store, &dedupe.Config{Prefix: "bench", Wait: 2 * time.Second, OnOutcome: func(_ context.Context, e dedupe.Event) { ev = e }})
			h := dedupe.HTTPAPI(g, nil, func(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
				runs.Add(1)
				time.Sleep(50 * time.Millisecond)
				return bare(ctx, req)
			})
			dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			resp, _ := h(dctx, request(key))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case resp.StatusCode == 201 && resp.Headers[dedupe.HeaderReplayed] == "true":
				res.Replays++
				res.MaxExtraReads = max(res.MaxExtraReads, ev.StoreCalls-1)
			case resp.StatusCode == 409:
				res.Conflicts++
				res.MaxExtraReads = max(res.MaxExtraReads, ev.StoreCalls-1)
			}
		}()
	}
	wg.Wait()
	if runs.Load() != 1 {
		return res, fmt.Errorf("waited: the handler ran %d times, want 1", runs.Load())
	}
	return res, nil
}

// motoReplay counts the DynamoDB calls of a replay on moto_server, when
// it is installed.
func motoReplay(ctx context.Context) string {
	if _, err := exec.LookPath(moto.DefaultBin); err != nil {
		return "moto_server not on PATH: not measured (pip install 'moto[server]')"
	}
	srv, err := moto.Start(ctx, moto.Options{})
	if err != nil {
		return "moto_server did not start: " + err.Error()
	}
	defer srv.Stop()
	calls := &counter{}
	c := newClient(srv.Endpoint(), calls)
	table, err := createTable(ctx, c, "ref")
	if err != nil {
		return "moto: " + err.Error()
	}
	store, err := dynamostore.New(c, dynamostore.Options{Table: table})
	if err != nil {
		return "moto: " + err.Error()
	}
	h := dedupe.HTTPAPI(dedupe.New(store, &dedupe.Config{Prefix: "bench"}), nil, bare)
	before := calls.n.Load()
	h(ctx, request("moto"))
	fresh := calls.n.Load() - before
	before = calls.n.Load()
	h(ctx, request("moto"))
	return fmt.Sprintf("moto_server: a fresh request costs %d calls, a replay %d (the item comes back with the failed condition)", fresh, calls.n.Load()-before)
}

// print writes the report as a table.
func print(w io.Writer, r Report) {
	fmt.Fprintf(w, "dedupe bench, %s, server: %s\n\n", r.When.Format(time.RFC3339), r.Server)
	fmt.Fprintln(w, "In process, HTTP API adapter over memstore (testing.Benchmark):")
	fmt.Fprintf(w, "  %-28s %12s %10s\n", "scenario", "ns/op", "allocs/op")
	for _, p := range r.InProcess {
		fmt.Fprintf(w, "  %-28s %12.0f %10d\n", p.Name, p.NsPerOp, p.AllocsOp)
	}
	fmt.Fprintln(w, "\nAgainst the DynamoDB endpoint, one request at a time:")
	fmt.Fprintf(w, "  %-28s %9s %9s %9s %12s\n", "scenario", "p50 ms", "p99 ms", "req/s", "calls/req")
	for _, l := range r.Latency {
		fmt.Fprintf(w, "  %-28s %9.2f %9.2f %9.0f %12.2f\n", l.Name, l.P50ms, l.P99ms, l.PerSecond, l.CallsPerReq)
	}
	fmt.Fprintf(w, "\nGuarded fresh request over its floor: %.2fx the latency of its two raw writes (p50, same run)\n", r.OverFloor)
	fmt.Fprintf(w, "Guarded replay over its floor: %.2fx the latency of its raw failed claim (and read, where the server returns no item) (p50, same run)\n", r.ReplayOverFloor)
	fmt.Fprintf(w, "Waited duplicates (%d concurrent on one key, 50 ms handler, Wait 2s): 1 ran, %d of its %d duplicates got the 201 replay (%.0f%%), %d got 409, at most %d extra reads each\n",
		r.Waited.Requests, r.Waited.Replays, r.Waited.Requests-1, 100*float64(r.Waited.Replays)/float64(r.Waited.Requests-1), r.Waited.Conflicts, r.Waited.MaxExtraReads)
	printWaits(w, r.Waits)
	fmt.Fprintln(w, r.Moto)
	fmt.Fprintln(w, "\nThrough the local stack (gateway, api bootstrap under the runtime emulator, up to 8 environments):")
	fmt.Fprintf(w, "  %-12s %-8s %9s %9s\n", "concurrency", "kind", "req/s", "p99 ms")
	for _, s := range r.Stack.Runs {
		fmt.Fprintf(w, "  %-12d %-8s %9.0f %9.1f\n", s.Concurrency, s.Kind, s.PerSecond, s.P99ms)
	}
	fmt.Fprintf(w, "  cold start of a new api environment: %.0f ms on average, %.0f ms at worst\n", r.Stack.ColdStartMs, r.Stack.ColdStartMaxMs)
	fmt.Fprintf(w, "  linux/arm64 bootstrap: %.1f MiB\n", float64(r.Stack.BootstrapBytes)/(1<<20))
}

// rawKeyOf is the primary key of stored key k on the bench's table, keyed
// by reference (template.yaml's default): its ref and pk.
func rawKeyOf(k string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		"ref": &types.AttributeValueMemberS{Value: dedupe.KeyRef(k)},
		"pk":  &types.AttributeValueMemberS{Value: k},
	}
}

// recording is a dynamostore.Client that passes every call on and keeps
// the inputs of its UpdateItem and GetItem calls, in order, for a floor
// to send again.
type recording struct {
	*dynamodb.Client
	calls []recorded
}

// recorded is one call a recording client passed on: its UpdateItem's
// input or its GetItem's.
type recorded struct {
	update *dynamodb.UpdateItemInput
	get    *dynamodb.GetItemInput
}

func (r *recording) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	r.calls = append(r.calls, recorded{update: in})
	return r.Client.UpdateItem(ctx, in, o...)
}

func (r *recording) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	r.calls = append(r.calls, recorded{get: in})
	return r.Client.GetItem(ctx, in, o...)
}

// take returns the calls recorded since the last take.
func (r *recording) take() []recorded {
	calls := r.calls
	r.calls = nil
	return calls
}
