package dedupe_test

import (
	"context"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/dynamostore"
	"github.com/lambda-dedupe/dedupe/pkg/memstore"
)

// waitRun is one waiting duplicate against a first request that holds
// the key and completes after finish (never when finish is 0).
type waitRun struct {
	wait     time.Duration // Config.Wait
	finish   time.Duration // when the first request completes; 0: never
	deadline time.Duration // the duplicate's context deadline; 0: none
}

// waitResult is what one waitRun observed.
type waitResult struct {
	out    dedupe.Outcome
	err    error
	ev     dedupe.Event
	slept  time.Duration // the pauses the guard asked for
	reads  int           // store reads after the claim
	answer time.Duration // clock time from the claim to the answer
}

// runWait claims key for a first owner in store, then runs a duplicate
// whose pauses move a fake clock and, once the clock passes finish,
// complete the first owner's record, as its handler would.
func runWait(t *testing.T, store dedupe.Store, key string, r waitRun) waitResult {
	t.Helper()
	clk := newClock()
	ctx := context.Background()
	start := clk.Now()
	if _, err := store.Claim(ctx, dedupe.ClaimRequest{Key: key, Fingerprint: "fp", Token: "first", Now: start,
		LeaseUntil: start.Add(time.Hour), ExpiresAt: start.Add(2 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	var res waitResult
	completed := false
	g := dedupe.New(store, &dedupe.Config{Prefix: "-", Now: clk.Now, Wait: r.wait,
		Sleep: func(ctx context.Context, d time.Duration) error {
			res.slept += d
			clk.Advance(d)
			if r.finish > 0 && !completed && clk.Now().Sub(start) >= r.finish {
				completed = true
				now := clk.Now()
				if err := store.Complete(ctx, dedupe.CompleteRequest{Key: key, Token: "first",
					Result: dedupe.Result{StatusCode: 201, Body: []byte("paid")}, Now: now, ExpiresAt: now.Add(time.Hour)}); err != nil {
					t.Errorf("complete the first request: %v", err)
				}
			}
			return nil
		},
		OnOutcome: func(_ context.Context, e dedupe.Event) { res.ev = e }})
	if r.deadline > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, start.Add(r.deadline))
		defer cancel()
	}
	// The guard prefixes keys with "-#": the first owner claimed the
	// stored form, so the duplicate asks for the bare key.
	res.out, res.err = g.Do(ctx, dedupe.Call{Key: key[len("-#"):], Fingerprint: "fp"}, func(context.Context) (dedupe.Result, error) {
		t.Error("a duplicate ran the function")
		return dedupe.Result{}, nil
	})
	res.reads = res.ev.StoreCalls - 1
	res.answer = clk.Now().Sub(start)
	return res
}

// readBudget is the documented bound on a waiting duplicate's reads:
// 6 plus 2 per second of waiting.
func readBudget(w time.Duration) int { return 6 + int(2*w/time.Second) }

// TestWaitLastsAsLongAsItSays checks that a duplicate of a request that
// never finishes waits exactly Config.Wait (or up to its deadline less
// the lease margin, when that comes first), within its read budget, and
// then answers ErrInProgress.
func TestWaitLastsAsLongAsItSays(t *testing.T) {
	for _, tt := range []struct {
		name      string
		run       waitRun
		wantSlept time.Duration
	}{
		{"100ms", waitRun{wait: 100 * time.Millisecond}, 100 * time.Millisecond},
		{"1s", waitRun{wait: time.Second}, time.Second},
		{"5s", waitRun{wait: 5 * time.Second}, 5 * time.Second},
		{"1min", waitRun{wait: time.Minute}, time.Minute},
		{"deadline first", waitRun{wait: time.Minute, deadline: 10 * time.Second}, 8 * time.Second},
		{"deadline within margin", waitRun{wait: time.Minute, deadline: time.Second}, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res := runWait(t, memstore.New(), "-#k", tt.run)
			if !errors.Is(res.err, dedupe.ErrInProgress) {
				t.Fatalf("err = %v, want ErrInProgress once the wait is over", res.err)
			}
			if res.slept != tt.wantSlept || res.answer != tt.wantSlept {
				t.Errorf("waited %v (answered at %v), want %v", res.slept, res.answer, tt.wantSlept)
			}
			if b := readBudget(tt.run.wait); res.reads > b {
				t.Errorf("%d reads, want at most %d", res.reads, b)
			}
		})
	}
}

// TestWaitAnswersWithTheResult checks that a duplicate of a request of
// 50 ms, 1 s and 5 s waits for it and is answered with its result, soon
// after it finished, within the read budget.
func TestWaitAnswersWithTheResult(t *testing.T) {
	for _, finish := range []time.Duration{50 * time.Millisecond, time.Second, 5 * time.Second} {
		t.Run(finish.String(), func(t *testing.T) {
			res := runWait(t, memstore.New(), "-#k", waitRun{wait: 10 * time.Second, finish: finish})
			checkWaited(t, res, finish)
		})
	}
}

// checkWaited checks that res is the first request's replay, answered
// at most one capped pause after finish, within the read budget.
func checkWaited(t *testing.T, res waitResult, finish time.Duration) {
	t.Helper()
	if res.err != nil || !res.out.Replayed || string(res.out.Result.Body) != "paid" || res.ev.Outcome != dedupe.OutcomeWaited {
		t.Fatalf("got %+v, %v (outcome %s); want the replay after waiting", res.out, res.err, res.ev.Outcome)
	}
	if late := res.answer - finish; late < 0 || late > 500*time.Millisecond {
		t.Errorf("answered %v after the first request finished, want within 500ms", late)
	}
	if b := readBudget(finish); res.reads > b {
		t.Errorf("%d reads for a %v request, want at most %d", res.reads, finish, b)
	}
}

// TestWaitDynamoDB runs the waiting duplicates on the DynamoDB store
// (dynalite or moto through AWS_ENDPOINT_URL_DYNAMODB; skipped without it,
// failed in CI), with the clock still injected.
func TestWaitDynamoDB(t *testing.T) {
	b := dynamoBackend(t, dynamostore.Options{})
	store, _ := b.new(t)
	for _, finish := range []time.Duration{50 * time.Millisecond, time.Second, 5 * time.Second} {
		t.Run(finish.String(), func(t *testing.T) {
			res := runWait(t, store, "-#wait-"+rand.Text(), waitRun{wait: 10 * time.Second, finish: finish})
			checkWaited(t, res, finish)
		})
	}
	t.Run("never", func(t *testing.T) {
		res := runWait(t, store, "-#wait-"+rand.Text(), waitRun{wait: 2 * time.Second})
		if !errors.Is(res.err, dedupe.ErrInProgress) || res.slept != 2*time.Second || res.reads > readBudget(2*time.Second) {
			t.Errorf("got %v after %v and %d reads; want ErrInProgress after 2s and at most %d reads", res.err, res.slept, res.reads, readBudget(2*time.Second))
		}
	})
}

// TestWaitReadBudgetDocumented holds the one statement of Wait's read
// budget (docs/options.md, the Wait row) to the guard: a duplicate that
// waits the whole of Wait makes exactly the reads its examples say, and
// never more than its bound for any Wait; no other page states a budget
// of its own.
func TestWaitReadBudgetDocumented(t *testing.T) {
	page, err := os.ReadFile("../../docs/options.md")
	if err != nil {
		t.Fatal(err)
	}
	stmt := regexp.MustCompile("at most (\\d+) reads plus (\\d+) per second of `Wait`\\*\\* \\((\\d+) for 1 s, (\\d+) for 5 s\\)")
	m := stmt.FindStringSubmatch(string(page))
	if m == nil {
		t.Fatalf("docs/options.md states no read budget matching %s", stmt)
	}
	atoi := func(s string) int { n, _ := strconv.Atoi(s); return n }
	base, perSecond, at1, at5 := atoi(m[1]), atoi(m[2]), atoi(m[3]), atoi(m[4])
	reads := func(w time.Duration) int {
		return runWait(t, memstore.New(), "-#budget-"+rand.Text(), waitRun{wait: w}).reads
	}
	if got := reads(time.Second); got != at1 {
		t.Errorf("Wait 1s: %d reads, the doc says %d", got, at1)
	}
	if got := reads(5 * time.Second); got != at5 {
		t.Errorf("Wait 5s: %d reads, the doc says %d", got, at5)
	}
	for w := 10 * time.Millisecond; w <= time.Minute; w += w/3 + 7*time.Millisecond {
		if got, bound := reads(w), float64(base)+float64(perSecond)*w.Seconds(); float64(got) > bound {
			t.Errorf("Wait %v: %d reads, above the documented %d + %d/s = %.1f", w, got, base, perSecond, bound)
		}
	}
	if readBudget(5*time.Second) != base+5*perSecond {
		t.Errorf("readBudget disagrees with the doc's %d + %d/s", base, perSecond)
	}
	// Stated once: no other page gives a number of reads for Wait.
	other := regexp.MustCompile(`(?i)(at most|up to) \d+ (strongly )?(consistent )?(reads|` + "`GetItem`" + `s)|\d+ ms in all`)
	pages, _ := filepath.Glob("../../docs/*.md")
	for _, p := range append(pages, "../../README.md") {
		if filepath.Base(p) == "options.md" {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if loc := other.Find(b); loc != nil {
			t.Errorf("%s states a read budget of its own (%q): link to options.md's Wait instead", filepath.Base(p), loc)
		}
	}
}
