package capacity

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/dynamostore"
)

// Sizes are the response body sizes Measure runs: 300 B, 4 KB, 10 KB and
// 100 KB.
var Sizes = []int{300, 4 << 10, 10 << 10, 100 << 10}

// The modes Measure reports: the store's two on a table keyed by
// reference (the default schema), the same two on a classic table, and
// Powertools' idempotency utility as modelled by Powertools.
const (
	ModeDefault        = "default"
	ModeLean           = "lean"
	ModeClassicDefault = "classic"
	ModeClassicLean    = "classic-lean"
	ModePowertools     = "powertools"
)

// Modes are the modes Measure reports, in order.
var Modes = []string{ModeDefault, ModeLean, ModeClassicDefault, ModeClassicLean, ModePowertools}

// The scenarios Measure reports, for one request each.
const (
	// ScenarioFresh is a request on a new key: claim, handler, complete.
	ScenarioFresh = "fresh"
	// ScenarioReplay is the same request again: it gets the stored
	// response.
	ScenarioReplay = "replay"
	// ScenarioFailure is a fresh request whose handler fails: claim,
	// release.
	ScenarioFailure = "failure"
	// ScenarioRetry is the retry of a failed request, which succeeds.
	ScenarioRetry = "retry"
)

// Row is the capacity units and calls of one scenario, in one mode, for
// one response size.
type Row struct {
	Mode     string
	Scenario string
	// Size is the response body's size in bytes.
	Size  int
	Units Units
	// Calls is the DynamoDB calls the scenario made.
	Calls int
}

// WriteTotal returns the row's table and index write units.
func (r Row) WriteTotal() float64 { return r.Units.Write + r.Units.IndexWrite }

// Body returns a JSON response body of exactly n bytes (n ≥ 2): an array
// of payment objects whose ids and amounts are pseudo-random (a fixed
// seed), so that it compresses as such JSON does, neither as well as a
// repeated string nor not at all.
func Body(n int) []byte {
	r := rand.New(rand.NewPCG(uint64(n), 34))
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	var b strings.Builder
	b.WriteByte('[')
	for b.Len() < n {
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		id := make([]byte, 16)
		for i := range id {
			id[i] = alphabet[r.IntN(len(alphabet))]
		}
		fmt.Fprintf(&b, `{"id":"pay_%s","amount":%d,"currency":"EUR","status":"succeeded"}`, id, r.IntN(100000))
	}
	out := []byte(b.String())[:n-1]
	return append(out, ']')
}

// Measure runs each scenario once per mode and size through a Meter over
// c, and returns the units and calls of each: the default modes on table
// (the idempotency table of template.yaml, keyed by reference,
// DefaultSchema), the classic ones and Powertools' on classic (a classic
// table, ClassicSchema, whose partition key pk is Powertools' too). The
// store's modes run through dedupe.Guard over dynamostore; Powertools' is
// the calls its idempotency utility makes (Powertools). With allOld, a
// failed conditional write that asks for the existing item gets it even
// from a server that ignores the request (dynalite), as on DynamoDB.
func Measure(ctx context.Context, c dynamostore.Client, table, classic string, allOld bool) ([]Row, error) {
	var rows []Row
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	for _, mode := range Modes {
		schema, on, keySchema := DefaultSchema(), table, dynamostore.KeySchemaByRef
		if mode == ModeClassicDefault || mode == ModeClassicLean || mode == ModePowertools {
			schema, on, keySchema = ClassicSchema(), classic, dynamostore.KeySchemaClassic
		}
		m := New(c, schema, allOld)
		var do func(key string, body []byte, fail bool) error
		if mode == ModePowertools {
			p := Powertools{Client: m, Table: on, Function: "payments-api-ApiFunction-4Xmpl3Fn"}
			do = func(key string, body []byte, fail bool) error { return p.Run(ctx, key, body, fail) }
		} else {
			s, err := dynamostore.New(m, dynamostore.Options{Table: on, Lean: mode == ModeLean || mode == ModeClassicLean,
				GlobalTables: dynamostore.GlobalTablesUnchecked, KeySchema: keySchema})
			if err != nil {
				return nil, err
			}
			// The failing scenario's release is expected: log nothing.
			g := dedupe.New(s, &dedupe.Config{Prefix: "cap", Logger: slog.New(slog.DiscardHandler)})
			do = func(key string, body []byte, fail bool) error {
				_, err := g.Do(ctx, dedupe.Call{Key: key, Fingerprint: "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}, func(context.Context) (dedupe.Result, error) {
					if fail {
						return dedupe.Result{}, errHandler
					}
					return dedupe.Result{StatusCode: 201, Headers: map[string][]string{"Content-Type": {"application/json"}}, Body: body}, nil
				})
				return err
			}
		}
		for _, size := range Sizes {
			body := Body(size)
			key := fmt.Sprintf("%s-%s-%d", run, mode, size)
			for _, sc := range []struct {
				name, key string
				fail      bool
			}{
				{ScenarioFresh, key, false},
				{ScenarioReplay, key, false},
				{ScenarioFailure, key + "-f", true},
				{ScenarioRetry, key + "-f", false},
			} {
				m.Reset()
				if err := do(sc.key, body, sc.fail); err != nil && !errors.Is(err, errHandler) {
					return nil, fmt.Errorf("%s, %s, %d B: %w", mode, sc.name, size, err)
				}
				rows = append(rows, Row{Mode: mode, Scenario: sc.name, Size: size, Units: m.Units(), Calls: m.Calls()})
			}
		}
	}
	return rows, nil
}

// errHandler is the failure of the failing scenario's handler.
var errHandler = errors.New("capacity: the handler failed")

// Print writes rows as a table: per mode and size, each scenario's write
// units (table + index), read units and calls.
func Print(w io.Writer, rows []Row) {
	fmt.Fprintf(w, "  %-12s %-8s %-8s %7s %7s %7s %6s\n", "mode", "size", "scenario", "write", "index", "read", "calls")
	for _, r := range rows {
		fmt.Fprintf(w, "  %-12s %-8s %-8s %7g %7g %7g %6d\n", r.Mode, SizeName(r.Size), r.Scenario, r.Units.Write, r.Units.IndexWrite, r.Units.Read, r.Calls)
	}
}

// SizeName names a size of Sizes as the docs do: "300 B", "4 KB".
func SizeName(n int) string {
	if n < 1<<10 {
		return strconv.Itoa(n) + " B"
	}
	return strconv.Itoa(n>>10) + " KB"
}

// On-demand prices in us-east-1 (since November 2024), in dollars per
// million request units.
const (
	WritePerMillion = 0.625
	ReadPerMillion  = 0.125
)

// PerMillion returns what a million requests of u cost on demand, in
// dollars.
func PerMillion(u Units) float64 {
	return (u.Write+u.IndexWrite)*WritePerMillion + u.Read*ReadPerMillion
}
