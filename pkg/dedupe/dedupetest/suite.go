package dedupetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
)

// Concurrency is the number of goroutines that race to claim one key in the
// concurrency case.
const Concurrency = 200

// base is the suite's fixed clock origin: in the future, on a whole second,
// so that a real DynamoDB TTL never deletes the suite's records mid-test.
var base = time.Date(2031, 1, 2, 3, 4, 5, 0, time.UTC)

// Run runs the contract suite against stores made by newStore. newStore is
// called once per case; stores may share a backend (a table), since every
// case uses keys of its own.
func Run(t *testing.T, newStore func(t *testing.T) dedupe.Store) {
	t.Helper()
	cases := []struct {
		name string
		fn   func(t *testing.T, s dedupe.Store)
	}{
		{"ClaimFreshKey", testClaimFresh},
		{"ClaimHeldKey", testClaimHeld},
		{"ReplayCompleted", testReplayCompleted},
		{"GetMissing", testGetMissing},
		{"ExpiredRecordIsAbsent", testExpiredIsAbsent},
		{"ClaimExpiredRecord", testClaimExpired},
		{"ExpiryHasSecondPrecision", testExpirySeconds},
		{"LeaseTakeover", testLeaseTakeover},
		{"CompletedIgnoresLease", testCompletedIgnoresLease},
		{"FencingAfterTakeover", testFencing},
		{"CompleteAfterLeaseWithoutTakeover", testCompleteLateNoTakeover},
		{"CompleteExpiredRecord", testCompleteExpired},
		{"ReleaseByOwner", testReleaseOwner},
		{"ReleaseByOther", testReleaseOther},
		{"ReleaseMissing", testReleaseMissing},
		{"ConcurrentClaims", testConcurrentClaims},
		{"ResultSharesNoMemory", testResultSharesNoMemory},
		{"OwnTokenClaimIsAcquired", testOwnTokenClaim},
		{"TakeoverNeedsSameFingerprint", testTakeoverSameFingerprint},
		{"HeadersByteExact", testHeadersByteExact},
		{"OmitResult", testOmitResult},
		{"KeyLimits", testKeyLimits},
		{"MiddlewareReplayExact", testMiddlewareReplayExact},
		{"ExtendLease", testExtend},
		{"Provenance", testProvenance},
		{"FirstTokenKeptAcrossTakeover", testFirstToken},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.fn(t, newStore(t))
		})
	}
}

// key returns a key unique to this test run.
func key(t *testing.T) string {
	return "dedupetest/" + t.Name() + "/" + rand.Text()
}

func claimReq(k, tok string, now time.Time, lease time.Duration) dedupe.ClaimRequest {
	return dedupe.ClaimRequest{
		Key:         k,
		Fingerprint: "fp-1",
		Token:       tok,
		Now:         now,
		LeaseUntil:  now.Add(lease),
		ExpiresAt:   now.Add(lease + time.Hour),
	}
}

func mustClaim(t *testing.T, s dedupe.Store, req dedupe.ClaimRequest, wantAcquired bool) dedupe.Record {
	t.Helper()
	res, err := s.Claim(context.Background(), req)
	if err != nil {
		t.Fatalf("Claim(%q): %v", req.Key, err)
	}
	if res.Acquired != wantAcquired {
		t.Fatalf("Claim(%q) acquired = %v, want %v (record %+v)", req.Key, res.Acquired, wantAcquired, res.Record)
	}
	return res.Record
}

func sampleResult() dedupe.Result {
	return dedupe.Result{
		StatusCode: 201,
		Headers: map[string][]string{
			"Content-Type": {"application/octet-stream"},
			"X-Multi":      {"a", "b"},
		},
		Body: []byte{0x00, 0xff, 0x10, '{', '"', 0x80, '\n'},
	}
}

func equalResult(a, b dedupe.Result) bool {
	return a.StatusCode == b.StatusCode && bytes.Equal(a.Body, b.Body) &&
		(len(a.Headers) == 0 && len(b.Headers) == 0 || reflect.DeepEqual(a.Headers, b.Headers))
}

func complete(s dedupe.Store, k, tok string, now time.Time, r dedupe.Result) error {
	return s.Complete(context.Background(), dedupe.CompleteRequest{
		Key: k, Token: tok, Result: r, Now: now, ExpiresAt: now.Add(time.Hour),
	})
}

func testClaimFresh(t *testing.T, s dedupe.Store) {
	k := key(t)
	now := base.Add(123 * time.Millisecond)
	req := claimReq(k, "tok-a", now, 30*time.Second)
	rec := mustClaim(t, s, req, true)
	got, err := s.Get(context.Background(), k, now)
	if err != nil {
		t.Fatalf("Get after claim: %v", err)
	}
	for _, r := range []dedupe.Record{rec, got} {
		if r.Key != k || r.Status != dedupe.StatusInProgress || r.Token != "tok-a" || r.Fingerprint != "fp-1" {
			t.Errorf("record = %+v, want key %q IN_PROGRESS tok-a fp-1", r, k)
		}
		if r.LeaseExpiresAt.UnixMilli() != req.LeaseUntil.UnixMilli() {
			t.Errorf("lease = %v, want %v (ms)", r.LeaseExpiresAt, req.LeaseUntil)
		}
		if r.ExpiresAt.Unix() != req.ExpiresAt.Unix() {
			t.Errorf("expires = %v, want %v (s)", r.ExpiresAt, req.ExpiresAt)
		}
		if r.CreatedAt.UnixMilli() != now.UnixMilli() {
			t.Errorf("created = %v, want %v", r.CreatedAt, now)
		}
		if r.Result != nil {
			t.Errorf("in-progress result = %+v, want nil", r.Result)
		}
	}
}

func testClaimHeld(t *testing.T, s dedupe.Store) {
	k := key(t)
	mustClaim(t, s, claimReq(k, "tok-a", base, 30*time.Second), true)
	second := claimReq(k, "tok-b", base.Add(29*time.Second), 30*time.Second)
	second.Fingerprint = "fp-2"
	rec := mustClaim(t, s, second, false)
	if rec.Token != "tok-a" || rec.Status != dedupe.StatusInProgress || rec.Fingerprint != "fp-1" {
		t.Errorf("existing record = %+v, want tok-a IN_PROGRESS fp-1", rec)
	}
}

func testReplayCompleted(t *testing.T, s dedupe.Store) {
	k := key(t)
	mustClaim(t, s, claimReq(k, "tok-a", base, 30*time.Second), true)
	want := sampleResult()
	if err := complete(s, k, "tok-a", base.Add(time.Second), want); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	rec := mustClaim(t, s, claimReq(k, "tok-b", base.Add(2*time.Second), 30*time.Second), false)
	if rec.Status != dedupe.StatusCompleted || rec.Result == nil {
		t.Fatalf("record = %+v, want COMPLETED with result", rec)
	}
	if !equalResult(*rec.Result, want) {
		t.Errorf("replayed result = %+v, want %+v", *rec.Result, want)
	}
	if rec.ExpiresAt.Unix() != base.Add(time.Second+time.Hour).Unix() {
		t.Errorf("expires = %v, want retention from completion", rec.ExpiresAt)
	}
	got, err := s.Get(context.Background(), k, base.Add(3*time.Second))
	if err != nil || got.Result == nil || !equalResult(*got.Result, want) {
		t.Errorf("Get = %+v, %v; want the stored result", got, err)
	}
	// A result kept in the record always replays: only a store keeping
	// results elsewhere may return these (RunExternalResults).
	_, cerr := s.Claim(context.Background(), claimReq(k, "tok-c", base.Add(3*time.Second), 30*time.Second))
	for _, e := range []error{err, cerr} {
		if errors.Is(e, dedupe.ErrResultUnreadable) || errors.Is(e, dedupe.ErrResultOmitted) {
			t.Errorf("replay of a small result = %v; want no error", e)
		}
	}
}

func testGetMissing(t *testing.T, s dedupe.Store) {
	_, err := s.Get(context.Background(), key(t), base)
	if !errors.Is(err, dedupe.ErrNotFound) {
		t.Errorf("Get(missing) error = %v, want ErrNotFound", err)
	}
}

func testExpiredIsAbsent(t *testing.T, s dedupe.Store) {
	k := key(t)
	mustClaim(t, s, claimReq(k, "tok-a", base, 30*time.Second), true)
	if err := complete(s, k, "tok-a", base, sampleResult()); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	later := base.Add(time.Hour + time.Second)
	if _, err := s.Get(context.Background(), k, later); !errors.Is(err, dedupe.ErrNotFound) {
		t.Errorf("Get(expired) error = %v, want ErrNotFound", err)
	}
	rec := mustClaim(t, s, claimReq(k, "tok-b", later, 30*time.Second), true)
	if rec.Token != "tok-b" || rec.Status != dedupe.StatusInProgress || rec.Result != nil {
		t.Errorf("record after claiming expired key = %+v, want fresh tok-b", rec)
	}
}

// testClaimExpired claims a completed record once it has expired, with no
// Get before the claim: the claim alone must see the expiry (stores may
// drop expired records on Get, which would hide a claim that does not).
func testClaimExpired(t *testing.T, s dedupe.Store) {
	k := key(t)
	mustClaim(t, s, claimReq(k, "tok-a", base, 30*time.Second), true)
	if err := complete(s, k, "tok-a", base, sampleResult()); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	// Alive within the expiry's own second, expired one second later.
	rec := mustClaim(t, s, claimReq(k, "tok-b", base.Add(time.Hour+999*time.Millisecond), 30*time.Second), false)
	if rec.Token != "tok-a" || rec.Status != dedupe.StatusCompleted {
		t.Errorf("record before expiry = %+v, want tok-a COMPLETED", rec)
	}
	rec = mustClaim(t, s, claimReq(k, "tok-c", base.Add(time.Hour+time.Second), 30*time.Second), true)
	if rec.Token != "tok-c" || rec.Status != dedupe.StatusInProgress || rec.Result != nil {
		t.Errorf("record after claiming expired key = %+v, want fresh tok-c", rec)
	}
}

func testExpirySeconds(t *testing.T, s dedupe.Store) {
	k := key(t)
	req := claimReq(k, "tok-a", base, 10*time.Second)
	req.ExpiresAt = base.Add(20 * time.Second)
	mustClaim(t, s, req, true)
	// Within the expiry's own second the record is alive.
	if _, err := s.Get(context.Background(), k, base.Add(20*time.Second+999*time.Millisecond)); err != nil {
		t.Errorf("Get within the expiry second: %v, want the record", err)
	}
	if _, err := s.Get(context.Background(), k, base.Add(21*time.Second)); !errors.Is(err, dedupe.ErrNotFound) {
		t.Errorf("Get one second after expiry: %v, want ErrNotFound", err)
	}
}

func testLeaseTakeover(t *testing.T, s dedupe.Store) {
	k := key(t)
	mustClaim(t, s, claimReq(k, "tok-a", base, time.Second), true)
	// The lease end itself still belongs to the owner (ms precision).
	mustClaim(t, s, claimReq(k, "tok-b", base.Add(time.Second), time.Second), false)
	rec := mustClaim(t, s, claimReq(k, "tok-b", base.Add(time.Second+time.Millisecond), time.Second), true)
	if rec.Token != "tok-b" {
		t.Errorf("token after takeover = %q, want tok-b", rec.Token)
	}
}

func testCompletedIgnoresLease(t *testing.T, s dedupe.Store) {
	k := key(t)
	mustClaim(t, s, claimReq(k, "tok-a", base, time.Second), true)
	if err := complete(s, k, "tok-a", base, sampleResult()); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	rec := mustClaim(t, s, claimReq(k, "tok-b", base.Add(time.Minute), time.Second), false)
	if rec.Status != dedupe.StatusCompleted {
		t.Errorf("status = %v, want COMPLETED kept after its old lease ran out", rec.Status)
	}
}

func testFencing(t *testing.T, s dedupe.Store) {
	k := key(t)
	ctx := context.Background()
	mustClaim(t, s, claimReq(k, "tok-a", base, time.Second), true)
	takeover := base.Add(2 * time.Second)
	mustClaim(t, s, claimReq(k, "tok-b", takeover, time.Minute), true)

	late := sampleResult()
	late.Body = []byte("late owner")
	if err := complete(s, k, "tok-a", takeover.Add(time.Second), late); !errors.Is(err, dedupe.ErrLeaseLost) {
		t.Errorf("late Complete error = %v, want ErrLeaseLost", err)
	}
	if err := s.Release(ctx, k, "tok-a"); !errors.Is(err, dedupe.ErrLeaseLost) {
		t.Errorf("late Release error = %v, want ErrLeaseLost", err)
	}
	rec, err := s.Get(ctx, k, takeover.Add(time.Second))
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if rec.Token != "tok-b" || rec.Status != dedupe.StatusInProgress || rec.Result != nil {
		t.Errorf("record after late owner = %+v, want tok-b IN_PROGRESS untouched", rec)
	}
	want := sampleResult()
	if err := complete(s, k, "tok-b", takeover.Add(2*time.Second), want); err != nil {
		t.Fatalf("new owner Complete: %v", err)
	}
	rec, err = s.Get(ctx, k, takeover.Add(3*time.Second))
	if err != nil || rec.Result == nil || !equalResult(*rec.Result, want) {
		t.Errorf("Get = %+v, %v; want the new owner's result", rec, err)
	}
}

func testCompleteLateNoTakeover(t *testing.T, s dedupe.Store) {
	k := key(t)
	mustClaim(t, s, claimReq(k, "tok-a", base, time.Second), true)
	if err := complete(s, k, "tok-a", base.Add(10*time.Second), sampleResult()); err != nil {
		t.Errorf("Complete after lease end, no takeover: %v, want nil", err)
	}
}

func testCompleteExpired(t *testing.T, s dedupe.Store) {
	k := key(t)
	req := claimReq(k, "tok-a", base, time.Second)
	req.ExpiresAt = base.Add(5 * time.Second)
	mustClaim(t, s, req, true)
	if err := complete(s, k, "tok-a", base.Add(10*time.Second), sampleResult()); !errors.Is(err, dedupe.ErrLeaseLost) {
		t.Errorf("Complete of expired record: %v, want ErrLeaseLost", err)
	}
}

func testReleaseOwner(t *testing.T, s dedupe.Store) {
	k := key(t)
	mustClaim(t, s, claimReq(k, "tok-a", base, time.Minute), true)
	if err := s.Release(context.Background(), k, "tok-a"); err != nil {
		t.Fatalf("Release: %v", err)
	}
	// The lease has ended; the record and its fingerprint stay.
	rec, err := s.Get(context.Background(), k, base)
	if err != nil || rec.Status != dedupe.StatusInProgress || rec.Fingerprint != "fp-1" || !rec.LeaseExpired(base) {
		t.Errorf("Get after release = %+v, %v; want IN_PROGRESS fp-1 with its lease ended", rec, err)
	}
	// A different request is still refused; the same one runs at once.
	other := claimReq(k, "tok-c", base, time.Minute)
	other.Fingerprint = "fp-2"
	mustClaim(t, s, other, false)
	mustClaim(t, s, claimReq(k, "tok-b", base, time.Minute), true)
	// A completed record cannot be released.
	if err := complete(s, k, "tok-b", base, sampleResult()); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	if err := s.Release(context.Background(), k, "tok-b"); !errors.Is(err, dedupe.ErrLeaseLost) {
		t.Errorf("Release of a completed record: %v, want ErrLeaseLost", err)
	}
	if rec, err := s.Get(context.Background(), k, base); err != nil || rec.Status != dedupe.StatusCompleted {
		t.Errorf("record after releasing it completed = %+v, %v; want COMPLETED", rec, err)
	}
}

func testReleaseOther(t *testing.T, s dedupe.Store) {
	k := key(t)
	mustClaim(t, s, claimReq(k, "tok-a", base, time.Minute), true)
	if err := s.Release(context.Background(), k, "tok-x"); !errors.Is(err, dedupe.ErrLeaseLost) {
		t.Errorf("Release by non-owner: %v, want ErrLeaseLost", err)
	}
	rec, err := s.Get(context.Background(), k, base)
	if err != nil || rec.Token != "tok-a" {
		t.Errorf("record after foreign release = %+v, %v; want tok-a kept", rec, err)
	}
}

func testReleaseMissing(t *testing.T, s dedupe.Store) {
	if err := s.Release(context.Background(), key(t), "tok-a"); !errors.Is(err, dedupe.ErrLeaseLost) {
		t.Errorf("Release of missing key: %v, want ErrLeaseLost", err)
	}
}

func testConcurrentClaims(t *testing.T, s dedupe.Store) {
	k := key(t)
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		winners []string
		losers  []dedupe.Record
		errs    []error
	)
	start := make(chan struct{})
	for i := range Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			tok := "tok-" + rand.Text()
			res, err := s.Claim(context.Background(), claimReq(k, tok, base.Add(time.Duration(i)*time.Microsecond), time.Minute))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				errs = append(errs, err)
			case res.Acquired:
				winners = append(winners, tok)
			default:
				losers = append(losers, res.Record)
			}
		}()
	}
	close(start)
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d claims failed, first: %v", len(errs), errs[0])
	}
	if len(winners) != 1 {
		t.Fatalf("winners = %d, want exactly 1", len(winners))
	}
	for _, rec := range losers {
		if rec.Token != winners[0] {
			t.Fatalf("loser saw token %q, want the winner's %q", rec.Token, winners[0])
		}
	}
}

// testResultSharesNoMemory changes the result a caller passed to Complete
// and the records Claim and Get handed out: the stored result must not
// change with them.
func testResultSharesNoMemory(t *testing.T, s dedupe.Store) {
	k := key(t)
	ctx := context.Background()
	mustClaim(t, s, claimReq(k, "tok-a", base, 30*time.Second), true)
	passed := sampleResult()
	if err := complete(s, k, "tok-a", base, passed); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	scribble := func(r *dedupe.Result) {
		r.Body[0] = 'X'
		r.Headers["X-Multi"][0] = "changed"
		r.Headers["X-Added"] = []string{"added"}
	}
	scribble(&passed)
	dup := mustClaim(t, s, claimReq(k, "tok-b", base.Add(time.Second), 30*time.Second), false)
	if dup.Result == nil {
		t.Fatalf("duplicate claim = %+v, want the stored result", dup)
	}
	if want := sampleResult(); !equalResult(*dup.Result, want) {
		t.Errorf("after changing the result passed to Complete: got %+v, want %+v", *dup.Result, want)
	}
	scribble(dup.Result)
	got, err := s.Get(ctx, k, base.Add(time.Second))
	if err != nil || got.Result == nil {
		t.Fatalf("Get = %+v, %v; want the stored result", got, err)
	}
	if want := sampleResult(); !equalResult(*got.Result, want) {
		t.Errorf("after changing the record Claim returned: got %+v, want %+v", *got.Result, want)
	}
	scribble(got.Result)
	again, err := s.Get(ctx, k, base.Add(time.Second))
	if err != nil || again.Result == nil || !equalResult(*again.Result, sampleResult()) {
		t.Errorf("after changing the record Get returned: got %+v, %v; want %+v", again.Result, err, sampleResult())
	}
}

// testOwnTokenClaim replays the claim of an owner whose first attempt was
// applied but whose answer was lost (a reset, a 500) and that a client
// library sent again: the store must recognise the owner's own token.
func testOwnTokenClaim(t *testing.T, s dedupe.Store) {
	k := key(t)
	req := claimReq(k, "tok-a", base, 30*time.Second)
	mustClaim(t, s, req, true)
	again := req
	again.Now = base.Add(50 * time.Millisecond)
	rec := mustClaim(t, s, again, true)
	if rec.Token != "tok-a" || rec.Status != dedupe.StatusInProgress {
		t.Errorf("record after own retried claim = %+v, want tok-a IN_PROGRESS", rec)
	}
	// Another owner is still held off, and the owner can complete.
	mustClaim(t, s, claimReq(k, "tok-b", base.Add(time.Second), 30*time.Second), false)
	if err := complete(s, k, "tok-a", base.Add(2*time.Second), sampleResult()); err != nil {
		t.Fatalf("Complete by the owner: %v", err)
	}
	// Once completed, even the old token only finds the replay.
	rec = mustClaim(t, s, claimReq(k, "tok-a", base.Add(3*time.Second), 30*time.Second), false)
	if rec.Status != dedupe.StatusCompleted || rec.Result == nil {
		t.Errorf("record = %+v, want COMPLETED with its result", rec)
	}
}

// testTakeoverSameFingerprint checks that only the same request may take
// over a key whose lease ran out: a different one would run a second,
// different side effect under the key.
func testTakeoverSameFingerprint(t *testing.T, s dedupe.Store) {
	k := key(t)
	mustClaim(t, s, claimReq(k, "tok-a", base, time.Second), true)
	other := claimReq(k, "tok-b", base.Add(time.Minute), time.Second)
	other.Fingerprint = "fp-2"
	rec := mustClaim(t, s, other, false)
	if rec.Token != "tok-a" || rec.Fingerprint != "fp-1" {
		t.Errorf("record after a different request's takeover attempt = %+v, want tok-a fp-1", rec)
	}
	rec = mustClaim(t, s, claimReq(k, "tok-c", base.Add(time.Minute), time.Second), true)
	if rec.Token != "tok-c" || rec.Fingerprint != "fp-1" {
		t.Errorf("record after the same request's takeover = %+v, want tok-c fp-1", rec)
	}
	// Expiry frees the key for any request.
	late := claimReq(k, "tok-d", base.Add(3*time.Hour), time.Second)
	late.Fingerprint = "fp-2"
	mustClaim(t, s, late, true)
}

// testHeadersByteExact stores header values that are not UTF-8 (RFC 9110
// obs-text, such as a Latin-1 filename) and an empty value: a replay must
// return the same bytes.
func testHeadersByteExact(t *testing.T, s dedupe.Store) {
	k := key(t)
	mustClaim(t, s, claimReq(k, "tok-a", base, 30*time.Second), true)
	want := dedupe.Result{
		StatusCode: 200,
		Headers: map[string][]string{
			"Content-Disposition": {"attachment; filename=\"caf\xe9.txt\""},
			"X-Raw":               {"\xff\xfe\x80", "", "plain"},
			"X-Empty":             {""},
		},
		Body: []byte("ok"),
	}
	if err := complete(s, k, "tok-a", base, want); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	got, err := s.Get(context.Background(), k, base)
	if err != nil || got.Result == nil {
		t.Fatalf("Get = %+v, %v", got, err)
	}
	if !reflect.DeepEqual(got.Result.Headers, want.Headers) {
		t.Errorf("headers = %q, want %q", got.Result.Headers, want.Headers)
	}
}

// testOmitResult records a run without its result: duplicates find it
// COMPLETED with ResultOmitted, and it is never free before it expires.
func testOmitResult(t *testing.T, s dedupe.Store) {
	k := key(t)
	mustClaim(t, s, claimReq(k, "tok-a", base, time.Second), true)
	err := s.Complete(context.Background(), dedupe.CompleteRequest{
		Key: k, Token: "tok-a", Result: sampleResult(), Now: base, ExpiresAt: base.Add(time.Hour), OmitResult: true,
	})
	if err != nil {
		t.Fatalf("Complete(OmitResult): %v", err)
	}
	rec := mustClaim(t, s, claimReq(k, "tok-b", base.Add(time.Minute), time.Second), false)
	if rec.Status != dedupe.StatusCompleted || !rec.ResultOmitted || rec.Result != nil {
		t.Errorf("record = %+v, want COMPLETED, ResultOmitted, no result", rec)
	}
}

// testKeyLimits holds every store to DynamoDB's key limits, so that a
// key one backend accepts never fails on another: up to
// dedupe.MaxStoreKeyBytes bytes of valid UTF-8 work; anything else is
// refused with ErrKeyRejected, which is not transient.
func testKeyLimits(t *testing.T, s dedupe.Store) {
	ctx := context.Background()
	prefix := key(t) + "/"
	longest := prefix + strings.Repeat("é", (dedupe.MaxStoreKeyBytes-len(prefix))/2)
	longest += strings.Repeat("x", dedupe.MaxStoreKeyBytes-len(longest))
	mustClaim(t, s, claimReq(longest, "tok-a", base, 30*time.Second), true)
	if err := complete(s, longest, "tok-a", base, sampleResult()); err != nil {
		t.Fatalf("Complete(%d-byte key): %v", len(longest), err)
	}
	if rec, err := s.Get(ctx, longest, base); err != nil || rec.Key != longest {
		t.Errorf("Get(%d-byte key) = %+v, %v; want the record under the same key", len(longest), rec, err)
	}

	bad := map[string]string{
		"empty":         "",
		"one too long":  longest + "x",
		"invalid UTF-8": prefix + "\xff\xfe",
	}
	for name, k := range bad {
		_, err := s.Claim(ctx, claimReq(k, "tok-a", base, 30*time.Second))
		if !errors.Is(err, dedupe.ErrKeyRejected) || errors.Is(err, dedupe.ErrStoreUnavailable) {
			t.Errorf("Claim(%s key) error = %v, want ErrKeyRejected, not ErrStoreUnavailable", name, err)
		}
		if err != nil && strings.Contains(err.Error(), k) && k != "" {
			t.Errorf("Claim(%s key) error quotes the key", name)
		}
		if _, err := s.Get(ctx, k, base); !errors.Is(err, dedupe.ErrKeyRejected) {
			t.Errorf("Get(%s key) error = %v, want ErrKeyRejected", name, err)
		}
		if err := complete(s, k, "tok-a", base, sampleResult()); !errors.Is(err, dedupe.ErrKeyRejected) {
			t.Errorf("Complete(%s key) error = %v, want ErrKeyRejected", name, err)
		}
		if err := s.Release(ctx, k, "tok-a"); !errors.Is(err, dedupe.ErrKeyRejected) {
			t.Errorf("Release(%s key) error = %v, want ErrKeyRejected", name, err)
		}
	}
}

// testFirstToken checks Record.FirstToken: a new life (absent or expired
// key) starts with the claim's token; the owner's own re-claim and a
// takeover of a stranded record keep it, and it is kept in the records
// Get and a failed Claim return; the next life gets a new one.
func testFirstToken(t *testing.T, s dedupe.Store) {
	k := key(t)
	rec := mustClaim(t, s, claimReq(k, "tok-a", base, time.Second), true)
	if rec.FirstToken != "tok-a" {
		t.Fatalf("FirstToken of a new life = %q, want tok-a", rec.FirstToken)
	}
	rec = mustClaim(t, s, claimReq(k, "tok-a", base.Add(10*time.Millisecond), time.Second), true)
	if rec.FirstToken != "tok-a" {
		t.Errorf("FirstToken after the owner's own re-claim = %q, want tok-a", rec.FirstToken)
	}
	rec = mustClaim(t, s, claimReq(k, "tok-b", base.Add(time.Minute), time.Second), true)
	if rec.Token != "tok-b" || rec.FirstToken != "tok-a" {
		t.Errorf("record after a takeover = token %q first %q, want tok-b, tok-a", rec.Token, rec.FirstToken)
	}
	held := mustClaim(t, s, claimReq(k, "tok-x", base.Add(time.Minute+10*time.Millisecond), time.Second), false)
	if held.FirstToken != "tok-a" {
		t.Errorf("FirstToken of the held record a failed Claim returns = %q, want tok-a", held.FirstToken)
	}
	if err := complete(s, k, "tok-b", base.Add(2*time.Minute), sampleResult()); err != nil {
		t.Fatalf("Complete by the new owner: %v", err)
	}
	got, err := s.Get(context.Background(), k, base.Add(2*time.Minute))
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if got.FirstToken != "tok-a" || got.Life() != "tok-a" {
		t.Errorf("completed record FirstToken = %q, Life %q, want tok-a", got.FirstToken, got.Life())
	}
	// After expiry the key starts a new life.
	rec = mustClaim(t, s, claimReq(k, "tok-c", base.Add(5*time.Hour), time.Second), true)
	if rec.FirstToken != "tok-c" {
		t.Errorf("FirstToken of the next life = %q, want tok-c", rec.FirstToken)
	}
}
