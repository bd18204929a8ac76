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

// BenchmarkPostgres measures one request three ways, side by side,
// against the test server, in the default query mode, in exec mode (what
// PgBouncer's transaction mode needs), and in exec mode through PgBouncer
// in transaction mode when PGBOUNCER_URL is set ("pgbouncer"):
//
//   - raw: the floor, the plainest statements doing the same round trips
//     on the same table, through the same connections and query mode
//     (INSERT … ON CONFLICT DO NOTHING, then UPDATE; a replay is one
//     SELECT by key);
//   - guard: dedupe.Guard.Run over the store (key scoping, fingerprint,
//     claim, the handler, completion);
//   - store: the store's calls alone (Claim, then Complete).
//
// calls/op counts round trips per request; x-floor is the row's ns/op
// divided by that of the raw row of its mode and kind (fresh or replay),
// measured just before it in the same run.
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
		perOp := func(b *testing.B) float64 { return float64(b.Elapsed().Nanoseconds()) / float64(b.N) }
		floor := map[string]float64{}
		vsFloor := func(b *testing.B, kind string) {
			if f := floor[kind]; f > 0 {
				b.ReportMetric(perOp(b)/f, "x-floor")
			}
		}
		insert := fmt.Sprintf(`INSERT INTO %s (key, status, fingerprint, owner, lease_expires_at, expires_at, created_at, updated_at)
			VALUES ($1::bytea, 'IN_PROGRESS', 'fp', 'tok', 0, 0, 0, 0) ON CONFLICT DO NOTHING`, table)
		update := fmt.Sprintf(`UPDATE %s SET status = 'COMPLETED', res_status = 201, res_body = $2::bytea WHERE key = $1::bytea`, table)
		get := fmt.Sprintf(`SELECT status, res_status, res_body FROM %s WHERE key = $1::bytea`, table)
		b.Run(m.name+"/raw/fresh", func(b *testing.B) {
			prefix, n := "raw-"+rand.Text(), 0
			for b.Loop() {
				n++
				k := []byte(prefix + strconv.Itoa(n))
				if _, err := p.Exec(ctx, insert, args(k)...); err != nil {
					b.Fatal(err)
				}
				if _, err := p.Exec(ctx, update, args(k, body)...); err != nil {
					b.Fatal(err)
				}
			}
			floor["fresh"] = perOp(b)
			b.ReportMetric(2, "calls/op")
		})
		b.Run(m.name+"/raw/replay", func(b *testing.B) {
			k := []byte("raw-" + rand.Text())
			p.Exec(ctx, insert, args(k)...)
			p.Exec(ctx, update, args(k, body)...)
			for b.Loop() {
				var st string
				var rs int32
				var rb []byte
				if err := p.QueryRow(ctx, get, args(k)...).Scan(&st, &rs, &rb); err != nil {
					b.Fatal(err)
				}
			}
			floor["replay"] = perOp(b)
			b.ReportMetric(1, "calls/op")
		})
		b.Run(m.name+"/guard/fresh", func(b *testing.B) {
			prefix, n := rand.Text(), 0
			counted.take()
			for b.Loop() {
				n++
				if _, err := g.Run(ctx, prefix+strconv.Itoa(n), "fp", fn); err != nil {
					b.Fatal(err)
				}
			}
			calls(b, n)
			vsFloor(b, "fresh")
		})
		b.Run(m.name+"/guard/replay", func(b *testing.B) {
			k := rand.Text()
			if _, err := g.Run(ctx, k, "fp", fn); err != nil {
				b.Fatal(err)
			}
			n := 0
			counted.take()
			for b.Loop() {
				n++
				if out, err := g.Run(ctx, k, "fp", fn); err != nil || !out.Replayed {
					b.Fatalf("replay = %+v, %v", out, err)
				}
			}
			calls(b, n)
			vsFloor(b, "replay")
		})
		b.Run(m.name+"/store/fresh", func(b *testing.B) {
			prefix, n := rand.Text(), 0
			counted.take()
			for b.Loop() {
				n++
				k := prefix + strconv.Itoa(n)
				if _, err := s.Claim(ctx, claim(k, "fp", "tok", base)); err != nil {
					b.Fatal(err)
				}
				if err := s.Complete(ctx, dedupe.CompleteRequest{Key: k, Token: "tok", Now: base, ExpiresAt: base.Add(time.Hour), Result: res}); err != nil {
					b.Fatal(err)
				}
			}
			calls(b, n)
			vsFloor(b, "fresh")
		})
		b.Run(m.name+"/store/replay", func(b *testing.B) {
			k := rand.Text()
			s.Claim(ctx, claim(k, "fp", "tok", base))
			s.Complete(ctx, dedupe.CompleteRequest{Key: k, Token: "tok", Now: base, ExpiresAt: base.Add(time.Hour), Result: res})
			n := 0
			counted.take()
			for b.Loop() {
				n++
				if r, err := s.Claim(ctx, claim(k, "fp", "tok-2", base)); err != nil || r.Acquired {
					b.Fatalf("claim = %+v, %v", r, err)
				}
			}
			calls(b, n)
			vsFloor(b, "replay")
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
