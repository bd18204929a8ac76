package pgstore_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lambda-dedupe/dedupe/localtest/pgtest"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/pgstore"
)

// BenchmarkPostgres measures one request three ways against the test
// server, in the default query mode, in exec mode (what PgBouncer's
// transaction mode needs), and in exec mode through PgBouncer in
// transaction mode when PGBOUNCER_URL is set ("pgbouncer"):
//
//   - raw: the floor, the plainest statements doing the same round trips
//     on the same table, through the same connections and query mode
//     (INSERT … ON CONFLICT DO NOTHING, then UPDATE; a replay is one
//     SELECT by key of the status and the result);
//   - guard: dedupe.Guard.Do over the store (key scoping, fingerprint,
//     claim, the handler, completion);
//   - store: the store's calls alone (Claim, then Complete).
//
// calls/op counts round trips per request. The guard and store rows run
// the floor of their kind (fresh or replay) beside each request, in turns
// (floor first on odd iterations, last on even ones), and time both: their
// ns/op is the request's alone, floor-ns/op the floor's, and x-floor the
// ratio of the two sums. Measured in turns, both see the same load, so
// the ratio holds on a shared machine where one measured after the other
// would not. Their B/op and allocs/op include the floor's (the raw rows
// show those alone).
func BenchmarkPostgres(b *testing.B) {
	direct := newPool(b)
	ctx := context.Background()
	table := newTable(b, direct)
	body := []byte(`{"id":"pay_1","amount":1250,"currency":"EUR","status":"succeeded"}`)
	fn := func(context.Context) (dedupe.Result, error) {
		return dedupe.Result{StatusCode: 201, Headers: map[string][]string{"Content-Type": {"application/json"}}, Body: body}, nil
	}
	res, _ := fn(ctx)
	type mode struct {
		name string
		pool *pgxpool.Pool
		mode pgx.QueryExecMode
	}
	modes := []mode{{"default", direct, 0}, {"exec", direct, pgx.QueryExecModeExec}}
	if url := os.Getenv(pgtest.EnvPgBouncerURL); url != "" {
		bouncer, err := pgxpool.New(ctx, url)
		if err != nil {
			b.Fatalf("%s: %v", pgtest.EnvPgBouncerURL, err)
		}
		b.Cleanup(bouncer.Close)
		modes = append(modes, mode{"pgbouncer", bouncer, pgx.QueryExecModeExec})
	}
	for _, m := range modes {
		p := m.pool
		counted := &counter{Client: p}
		s := newStore(b, counted, pgstore.Options{Table: table, ExecMode: m.mode})
		g := dedupe.New(s, &dedupe.Config{Prefix: "bench", Now: func() time.Time { return base }})
		calls := func(b *testing.B, n int) {
			b.ReportMetric(float64(len(counted.take()))/float64(n), "calls/op")
		}
		args := func(a ...any) []any {
			if m.mode == 0 {
				return a
			}
			return append([]any{m.mode}, a...)
		}
		insert := fmt.Sprintf(`INSERT INTO %s (key, status, fingerprint, owner, lease_expires_at, expires_at, created_at, updated_at)
			VALUES ($1::bytea, 'IN_PROGRESS', 'fp', 'tok', 0, 0, 0, 0) ON CONFLICT DO NOTHING`, table)
		update := fmt.Sprintf(`UPDATE %s SET status = 'COMPLETED', res_status = 201, res_body = $2::bytea WHERE key = $1::bytea`, table)
		get := fmt.Sprintf(`SELECT status, res_status, res_body FROM %s WHERE key = $1::bytea`, table)
		// The floors, one request each: fresh on a new key, replay on
		// replayKey.
		floorPrefix, floorN := "raw-"+rand.Text(), 0
		floorFresh := func(b *testing.B) {
			floorN++
			k := []byte(floorPrefix + strconv.Itoa(floorN))
			if _, err := p.Exec(ctx, insert, args(k)...); err != nil {
				b.Fatal(err)
			}
			if _, err := p.Exec(ctx, update, args(k, body)...); err != nil {
				b.Fatal(err)
			}
		}
		replayKey := []byte("raw-" + rand.Text())
		p.Exec(ctx, insert, args(replayKey)...)
		p.Exec(ctx, update, args(replayKey, body)...)
		floorReplay := func(b *testing.B) {
			var st string
			var rs int32
			var rb []byte
			if err := p.QueryRow(ctx, get, args(replayKey)...).Scan(&st, &rs, &rb); err != nil {
				b.Fatal(err)
			}
		}
		floors := map[string]func(*testing.B){"fresh": floorFresh, "replay": floorReplay}
		// paired runs op (given its iteration, from 1) and the floor of
		// kind in turns and reports their times (see above).
		paired := func(b *testing.B, kind string, op func(n int)) {
			floor := floors[kind]
			var opTime, floorTime time.Duration
			n := 0
			counted.take()
			for b.Loop() {
				n++
				t0 := time.Now()
				if n%2 == 1 {
					floor(b)
				}
				t1 := time.Now()
				op(n)
				t2 := time.Now()
				if n%2 == 0 {
					floor(b)
				}
				opTime += t2.Sub(t1)
				floorTime += t1.Sub(t0) + time.Since(t2)
			}
			calls(b, n)
			b.ReportMetric(float64(opTime.Nanoseconds())/float64(n), "ns/op")
			b.ReportMetric(float64(floorTime.Nanoseconds())/float64(n), "floor-ns/op")
			b.ReportMetric(float64(opTime)/float64(floorTime), "x-floor")
		}
		b.Run(m.name+"/raw/fresh", func(b *testing.B) {
			for b.Loop() {
				floorFresh(b)
			}
			b.ReportMetric(2, "calls/op")
		})
		b.Run(m.name+"/raw/replay", func(b *testing.B) {
			for b.Loop() {
				floorReplay(b)
			}
			b.ReportMetric(1, "calls/op")
		})
		b.Run(m.name+"/guard/fresh", func(b *testing.B) {
			prefix := rand.Text()
			paired(b, "fresh", func(n int) {
				if _, err := g.Do(ctx, dedupe.Call{Key: prefix + strconv.Itoa(n), Fingerprint: "fp"}, fn); err != nil {
					b.Fatal(err)
				}
			})
		})
		b.Run(m.name+"/guard/replay", func(b *testing.B) {
			k := rand.Text()
			if _, err := g.Do(ctx, dedupe.Call{Key: k, Fingerprint: "fp"}, fn); err != nil {
				b.Fatal(err)
			}
			paired(b, "replay", func(int) {
				if out, err := g.Do(ctx, dedupe.Call{Key: k, Fingerprint: "fp"}, fn); err != nil || !out.Replayed {
					b.Fatalf("replay = %+v, %v", out, err)
				}
			})
		})
		b.Run(m.name+"/store/fresh", func(b *testing.B) {
			prefix := rand.Text()
			paired(b, "fresh", func(n int) {
				k := prefix + strconv.Itoa(n)
				if _, err := s.Claim(ctx, claim(k, "fp", "tok", base)); err != nil {
					b.Fatal(err)
				}
				if err := s.Complete(ctx, dedupe.CompleteRequest{Key: k, Token: "tok", Now: base, ExpiresAt: base.Add(time.Hour), Result: res}); err != nil {
					b.Fatal(err)
				}
			})
		})
		b.Run(m.name+"/store/replay", func(b *testing.B) {
			k := rand.Text()
			s.Claim(ctx, claim(k, "fp", "tok", base))
			s.Complete(ctx, dedupe.CompleteRequest{Key: k, Token: "tok", Now: base, ExpiresAt: base.Add(time.Hour), Result: res})
			paired(b, "replay", func(int) {
				if r, err := s.Claim(ctx, claim(k, "fp", "tok-2", base)); err != nil || r.Acquired {
					b.Fatalf("claim = %+v, %v", r, err)
				}
			})
		})
	}
}

// BenchmarkReap shows that a reap's cost follows what it touches, not the
// table: for each table size it seeds completed rows that are still live,
// then per iteration adds 10 expired and 10 stranded rows (untimed) and
// reaps them. Compare ns/op across the sizes.
func BenchmarkReap(b *testing.B) {
	const perRun = 10
	for _, size := range []int{1_000, 100_000} {
		b.Run(fmt.Sprintf("live=%d", size), func(b *testing.B) {
			p := newPool(b)
			ctx := context.Background()
			table := newTable(b, p)
			s := newStore(b, p, pgstore.Options{Table: table})
			_, err := p.Exec(ctx, `INSERT INTO `+table+` (key, status, fingerprint, owner, lease_expires_at, expires_at, created_at, updated_at, res_status)
				SELECT convert_to('live-' || i, 'UTF8'), 'COMPLETED', 'fp', 'tok', 0, $1::bigint, 0, 0, 200 FROM generate_series(1, $2::integer) i`,
				base.Add(48*time.Hour).Unix(), size)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := p.Exec(ctx, "ANALYZE "+table); err != nil {
				b.Fatal(err)
			}
			now := base.Add(24 * time.Hour)
			opts := pgstore.ReapOptions{Now: func() time.Time { return now }}
			run := 0
			for b.Loop() {
				b.StopTimer()
				run++
				for i := range perRun {
					k := fmt.Sprintf("r%d-%d", run, i)
					expired := claim("exp-"+k, "fp", "tok", base) // expires base+1h
					stranded := claim("str-"+k, "fp", "tok", now.Add(-time.Hour))
					stranded.ExpiresAt = now.Add(time.Hour)
					for _, req := range []dedupe.ClaimRequest{expired, stranded} {
						if _, err := s.Claim(ctx, req); err != nil {
							b.Fatal(err)
						}
					}
				}
				b.StartTimer()
				report, err := s.Reap(ctx, opts)
				if err != nil || report.Deleted != perRun || report.Retired != perRun {
					b.Fatalf("report %+v, %v: want %d deleted and %d retired", report, err, perRun, perRun)
				}
			}
		})
	}
}
