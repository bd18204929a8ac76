package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

func TestFirstRequestThenReplay(t *testing.T) {
	needStack(t)
	key, c := newKey(), newCharge("tok_visa")

	first := pay(t, key, c, "")
	if first.status != 201 || first.replayed() {
		t.Fatalf("first request: got %d replayed=%v %s, want 201 not replayed", first.status, first.replayed(), first.body)
	}
	var p payment
	if err := json.Unmarshal(first.body, &p); err != nil || p.ID == "" || p.Amount != c.Amount || p.Source != c.Source {
		t.Fatalf("first request: got body %s (%v), want the payment", first.body, err)
	}

	again := pay(t, key, c, "")
	if !sameReply(first, again) || !again.replayed() {
		t.Errorf("retry: got %d replayed=%v %q, want %d %q byte for byte with Idempotent-Replayed: true",
			again.status, again.replayed(), again.body, first.status, first.body)
	}
	if got := charged(t, c); got != 1 {
		t.Errorf("got %d payments listed, want exactly 1", got)
	}
	one := mustSend(t, "GET", "/payments/"+p.ID, "", nil)
	if one.status != 200 || !strings.Contains(string(one.body), p.ID) {
		t.Errorf("GET /payments/%s: got %d %s, want 200 with the payment", p.ID, one.status, one.body)
	}
}

// TestConcurrentDuplicates sends 200 identical requests at once. They run in
// separate execution environments (processes), so their claims really race
// in DynamoDB. With an instant charge most duplicates arrive after the
// first completed and get its replay; with a slow one they find it in
// flight and get 409.
func TestConcurrentDuplicates(t *testing.T) {
	needStack(t)
	// Warm every environment first (maxConcurrency slow charges at once),
	// so that the duplicates race on claims rather than queue behind cold
	// starts.
	var warm sync.WaitGroup
	for range maxConcurrency {
		warm.Add(1)
		go func() {
			defer warm.Done()
			if _, err := send("POST", "/payments", newCharge("tok_slow").JSON(), map[string]string{"Idempotency-Key": newKey()}); err != nil {
				t.Error(err)
			}
		}()
	}
	warm.Wait()

	tests := []struct {
		name     string
		source   string
		want409s bool
	}{
		{name: "instant charge", source: "tok_visa"},
		{name: "slow charge", source: "tok_slow", want409s: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { raceDuplicates(t, tt.source, tt.want409s) })
	}
}

// raceDuplicates sends 200 concurrent requests with one key and checks that
// exactly one ran.
func raceDuplicates(t *testing.T, source string, want409s bool) {
	const n = 200
	key, c := newKey(), newCharge(source)
	pool := stack.Pool("ApiFunction")

	// Sample how many environments run at once while the requests race.
	stopSampling := make(chan struct{})
	peak := make(chan int, 1)
	go func() {
		m := 0
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			m = max(m, pool.Stats().Busy)
			select {
			case <-stopSampling:
				peak <- m
				return
			case <-tick.C:
			}
		}
	}()

	start := make(chan struct{})
	replies := make([]reply, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			replies[i], errs[i] = send("POST", "/payments", c.JSON(), map[string]string{"Idempotency-Key": key})
		}()
	}
	began := time.Now()
	close(start)
	wg.Wait()
	close(stopSampling)
	busy := <-peak
	t.Logf("%d concurrent requests in %v; up to %d environments busy at once", n, time.Since(began).Round(time.Millisecond), busy)

	var created []reply
	counts := map[string]int{}
	for i, r := range replies {
		if errs[i] != nil {
			t.Fatalf("request %d: %v", i, errs[i])
		}
		switch {
		case r.status == 201 && !r.replayed():
			created = append(created, r)
			counts["201"]++
		case r.status == 201:
			counts["201 replayed"]++
		case r.status == 409:
			counts["409"]++
			if problemOf(r).Status != 409 || r.header.Get("Retry-After") == "" {
				t.Errorf("request %d: 409 without a problem body or Retry-After: %s", i, r.body)
			}
		default:
			counts[strconv.Itoa(r.status)]++
			if counts[strconv.Itoa(r.status)] <= 3 {
				t.Errorf("request %d: got %d %s, want 201, a replay or 409", i, r.status, r.body)
			}
		}
	}
	t.Logf("outcomes: %v", counts)
	if len(created) != 1 {
		t.Fatalf("got %d executions answering 201, want exactly 1", len(created))
	}
	for i, r := range replies {
		if r.status == 201 && r.replayed() && !sameReply(created[0], r) {
			t.Errorf("request %d: replay %q differs from the first response %q", i, r.body, created[0].body)
		}
	}
	if want409s && counts["409"] == 0 {
		t.Errorf("got no 409 while the first request was in flight")
	}
	if busy < 8 {
		t.Errorf("got at most %d environments busy at once, want the requests spread over at least 8", busy)
	}
	if got := charged(t, c); got != 1 {
		t.Errorf("got %d payments, want exactly 1", got)
	}
}

func TestDeclinedIsReplayed(t *testing.T) {
	needStack(t)
	key, c := newKey(), newCharge("tok_chargeDeclined")
	first := pay(t, key, c, "")
	if first.status != 402 {
		t.Fatalf("got %d %s, want 402", first.status, first.body)
	}
	again := pay(t, key, c, "")
	if !sameReply(first, again) || !again.replayed() {
		t.Errorf("retry: got %d replayed=%v %s, want the 402 replayed byte for byte", again.status, again.replayed(), again.body)
	}
	// The decline is recorded once, like a real processor's; nothing charged.
	if got := chargesOf(t, c); got["declined"] != 1 || got["succeeded"] != 0 {
		t.Errorf("got payments by status %v, want exactly one declined", got)
	}
}

// TestProcessorErrorThenRetry: a 502 releases the key, so the client's
// retry of the same request runs again. The key stays bound to that
// request: the same key with another body is refused (422), as Stripe and
// the IETF draft refuse it, so a client that changes its request takes a
// new key (issue 9, case 8: a key is never run for two different
// requests).
func TestProcessorErrorThenRetry(t *testing.T) {
	needStack(t)
	key, c := newKey(), newCharge("tok_processorError")
	first := pay(t, key, c, "")
	if first.status != 502 || first.replayed() {
		t.Fatalf("got %d %s, want 502", first.status, first.body)
	}
	same := pay(t, key, c, "")
	if same.status != 502 || same.replayed() {
		t.Errorf("same request again: got %d replayed=%v, want it to run again (502), not a replay", same.status, same.replayed())
	}
	other := c
	other.Source = "tok_visa"
	if r := pay(t, key, other, ""); r.status != 422 {
		t.Errorf("other request under the released key: got %d %s, want 422", r.status, r.body)
	}
	retry := pay(t, newKey(), other, "")
	if retry.status != 201 || retry.replayed() {
		t.Fatalf("the new request under a new key: got %d %s, want 201", retry.status, retry.body)
	}
	if got := chargesOf(t, other); got["succeeded"] != 1 || len(got) != 1 {
		t.Errorf("got payments by status %v, want one succeeded", got)
	}
}

func TestSlowRequestIsInFlight(t *testing.T) {
	needStack(t)
	key, c := newKey(), newCharge("tok_slow")
	start := time.Now()
	firstDone := make(chan reply, 1)
	go func() {
		r, err := send("POST", "/payments", c.JSON(), map[string]string{"Idempotency-Key": key})
		if err != nil {
			t.Error(err)
		}
		firstDone <- r
	}()
	// Once the first request has claimed the key, and while its slow
	// charge runs (3 s), a duplicate finds it in flight. Waiting for the
	// claim first keeps a slow cold start of the first request from
	// letting the duplicate claim and run instead.
	if !eventually(patience, 20*time.Millisecond, func() bool { return inFlightSince(t, start) > 0 }) {
		t.Fatalf("the first request did not claim its key within %v", patience)
	}
	replies := []reply{pay(t, key, c, ""), <-firstDone}
	conflict := func() (reply, bool) {
		for _, r := range replies {
			if r.status == 409 {
				return r, true
			}
		}
		return reply{}, false
	}
	if _, ok := conflict(); !ok {
		t.Fatalf("no 409 while the slow charge ran; got %d and %d", replies[0].status, replies[1].status)
	}
	c409, _ := conflict()
	if ra, err := strconv.Atoi(c409.header.Get("Retry-After")); err != nil || ra < 1 || ra > 15 {
		t.Errorf("409: got Retry-After %q, want the whole seconds left on the lease", c409.header.Get("Retry-After"))
	}
	var fresh []reply
	for _, r := range replies {
		if r.status == 201 && !r.replayed() {
			fresh = append(fresh, r)
		} else if r.status != 409 {
			t.Errorf("got %d %s, want 201 or 409", r.status, r.body)
		}
	}
	if len(fresh) != 1 {
		t.Fatalf("got %d fresh 201s, want exactly 1", len(fresh))
	}
	again := pay(t, key, c, "")
	if !sameReply(fresh[0], again) || !again.replayed() {
		t.Errorf("after the slow charge: got %d replayed=%v, want the replay", again.status, again.replayed())
	}
	if got := charged(t, c); got != 1 {
		t.Errorf("got %d payments, want 1", got)
	}
}

func TestPanicReleasesKey(t *testing.T) {
	needStack(t)
	key, c := newKey(), newCharge("tok_panic")
	pool := stack.Pool("ApiFunction")
	replacedBefore := pool.Stats().Replaced
	for i := range 2 {
		r := pay(t, key, c, "")
		// A panic is an invoke error: API Gateway answers a bare 500.
		if r.status != 500 || strings.TrimSpace(string(r.body)) != `{"message":"Internal Server Error"}` {
			t.Fatalf("attempt %d: got %d %s, want 500 Internal Server Error (the retry runs again, it is not a 409)", i+1, r.status, r.body)
		}
	}
	if got := pool.Stats().Replaced - replacedBefore; got != 2 {
		t.Errorf("got %d environments replaced, want 2: the runtime exits after a panic", got)
	}
	if got := charged(t, c); got != 0 {
		t.Errorf("got %d payments, want 0", got)
	}
}

// TestTimeoutThenTakeover follows a record left in flight by a timed-out
// invocation (template timeout 10 s; the lease is the invocation deadline
// plus a 2 s margin). tok_timeout never answers. Its side effect may have
// happened, so the key stays bound to that request even once its lease is
// out (issue 9, case 8): a different request under the key is refused,
// before and after the reaper retires the stranded record; only a retry of
// the same request could take it over.
//
//	t=0        POST tok_timeout: claimed, lease until t+12s
//	t=0..12s   the same request gets 409; the reaper (grace 1ms here)
//	           leaves the live record alone
//	t=10s      the emulator kills the runtime: 500; the record stays IN_PROGRESS
//	t>=12s     the lease is out: the reaper retires the record; another
//	           request under the key still gets 422, and nothing was charged
func TestTimeoutThenTakeover(t *testing.T) {
	needStack(t)
	key, c := newKey(), newCharge("tok_timeout")
	start := time.Now()
	firstDone := make(chan reply, 1)
	go func() {
		r, err := send("POST", "/payments", c.JSON(), map[string]string{"Idempotency-Key": key})
		if err != nil {
			t.Error(err)
		}
		firstDone <- r
	}()

	// Once the first request has claimed the key, it is in flight.
	if !eventually(patience, 20*time.Millisecond, func() bool { return inFlightSince(t, start) > 0 }) {
		t.Fatal("the first request never claimed its key")
	}
	inFlight := pay(t, key, c, "")
	if inFlight.status != 409 {
		t.Fatalf("while the first request runs: got %d %s, want 409 in flight", inFlight.status, inFlight.body)
	}
	if ra, err := strconv.Atoi(inFlight.header.Get("Retry-After")); err != nil || ra < 1 || ra > 13 {
		t.Errorf("409: got Retry-After %q, want the seconds left on the lease", inFlight.header.Get("Retry-After"))
	}
	// The reaper never removes a live record.
	if report := reap(t); report.Cleared != 0 {
		t.Errorf("reaper during the lease: got %+v, want nothing cleared", report)
	}
	if r := pay(t, key, c, ""); r.status != 409 {
		t.Errorf("after the reaper ran: got %d %s, want still 409", r.status, r.body)
	}

	first := <-firstDone
	took := time.Since(start)
	if first.status != 500 || strings.TrimSpace(string(first.body)) != `{"message":"Internal Server Error"}` {
		t.Fatalf("got %d %s after %v, want 500 when the function times out", first.status, first.body, took)
	}
	if took < 9*time.Second {
		t.Errorf("answered after %v, want about the 10s function timeout", took)
	}

	// Once the lease is out, the reaper retires the record...
	var report reapReport
	if !eventually(patience, 200*time.Millisecond, func() bool {
		report = reap(t)
		return report.Cleared > 0
	}) {
		t.Fatalf("the reaper never retired the stranded record (%+v) %v after the first request", report, time.Since(start))
	}
	if at := time.Since(start); at < 12*time.Second {
		t.Errorf("retired %v after the start, want after the lease (the 10s deadline + 2s margin)", at)
	}
	// ...and the key still refuses a different request.
	other := c
	other.Source = "tok_visa"
	if r := pay(t, key, other, ""); r.status != 422 {
		t.Errorf("another request under the stranded key: got %d %s, want 422", r.status, r.body)
	}
	if got := chargesOf(t, other); len(got) != 0 {
		t.Errorf("got payments by status %v, want none", got)
	}
	if report := reap(t); report.Cleared != 0 {
		t.Errorf("second reaper run: got %+v, want nothing left to clear", report)
	}
}

// inFlightSince counts the idempotency records that are IN_PROGRESS and
// were created at or after since, read straight from the table.
func inFlightSince(t *testing.T, since time.Time) int {
	t.Helper()
	out, err := dynamoClient().Scan(context.Background(), &dynamodb.ScanInput{
		TableName:                 aws.String(tableName("IdempotencyTable")),
		ConsistentRead:            aws.Bool(true),
		FilterExpression:          aws.String("#s = :p AND created_at >= :since"),
		ExpressionAttributeNames:  map[string]string{"#s": "status"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":p": &types.AttributeValueMemberS{Value: "IN_PROGRESS"}, ":since": &types.AttributeValueMemberN{Value: strconv.FormatInt(since.UnixMilli(), 10)}},
	})
	if err != nil {
		t.Fatalf("scan the idempotency table: %v", err)
	}
	return int(out.Count)
}

// reapReport is the reaper function's result.
type reapReport struct {
	Found, Cleared, Skipped, Errors int
}

// reap runs the reaper function once, as its schedule does.
func reap(t *testing.T) reapReport {
	t.Helper()
	for _, sc := range stack.Schedules() {
		if sc.Function != "ReaperFunction" {
			continue
		}
		result, err := stack.InvokeSchedule(context.Background(), sc)
		if err != nil {
			t.Fatalf("reaper: %v", err)
		}
		var r reapReport
		if err := json.Unmarshal(result, &r); err != nil {
			t.Fatalf("reaper result %s: %v", result, err)
		}
		return r
	}
	t.Fatal("the template has no ReaperFunction schedule")
	return reapReport{}
}

func TestKeyErrors(t *testing.T) {
	needStack(t)
	reused := newKey()
	if r := pay(t, reused, newCharge("tok_visa"), ""); r.status != 201 {
		t.Fatalf("setup: got %d %s, want 201", r.status, r.body)
	}
	tests := []struct {
		name       string
		key        string
		wantStatus int
		wantType   string
	}{
		{name: "missing key", key: "", wantStatus: 400, wantType: "idempotency-key-missing"},
		{name: "key too long", key: strings.Repeat("k", 256), wantStatus: 400, wantType: "idempotency-key-invalid"},
		{name: "unterminated quoted key", key: `"unterminated`, wantStatus: 400, wantType: "idempotency-key-invalid"},
		{name: "non-ASCII key", key: "clé-1", wantStatus: 400, wantType: "idempotency-key-invalid"},
		{name: "same key, changed body", key: reused, wantStatus: 422, wantType: "idempotency-key-reused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCharge("tok_visa")
			r := pay(t, tt.key, c, "")
			p := problemOf(r)
			if r.status != tt.wantStatus || !strings.HasSuffix(p.Type, tt.wantType) || p.Status != tt.wantStatus {
				t.Errorf("got %d %s, want %d with problem type ...%s", r.status, r.body, tt.wantStatus, tt.wantType)
			}
			if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
				t.Errorf("got Content-Type %q, want application/problem+json", ct)
			}
			if got := charged(t, c); got != 0 {
				t.Errorf("got %d payments, want 0", got)
			}
		})
	}
}

func TestKeysAreScopedByCaller(t *testing.T) {
	needStack(t)
	key, c := newKey(), newCharge("tok_visa")
	alice, bob := signedBy("alice"), signedBy("bob")

	a := pay(t, key, c, alice)
	b := pay(t, key, c, bob)
	if a.status != 201 || b.status != 201 || b.replayed() {
		t.Fatalf("got alice %d, bob %d replayed=%v; want two fresh 201s", a.status, b.status, b.replayed())
	}
	var pa, pb payment
	if err := json.Unmarshal(a.body, &pa); err != nil {
		t.Fatalf("alice: body %s: %v", a.body, err)
	}
	if err := json.Unmarshal(b.body, &pb); err != nil {
		t.Fatalf("bob: body %s: %v", b.body, err)
	}
	if pa.ID == "" || pb.ID == "" || pa.ID == pb.ID {
		t.Errorf("got payment ids %q and %q, want each caller its own payment", pa.ID, pb.ID)
	}
	if r := pay(t, key, c, alice); !sameReply(a, r) || !r.replayed() {
		t.Errorf("alice's retry: got %d %s, want her own response replayed", r.status, r.body)
	}
	if r := pay(t, key, c, bob); !sameReply(b, r) || !r.replayed() {
		t.Errorf("bob's retry: got %d %s, want his own response replayed", r.status, r.body)
	}
	if got := charged(t, c, alice, bob); got != 2 {
		t.Errorf("got %d payments, want 2 (one per caller)", got)
	}
	// Each sees only its own payment.
	for _, who := range []struct{ auth, id string }{{alice, pa.ID}, {bob, pb.ID}} {
		if got := chargesOf(t, c, who.auth)["succeeded"]; got != 1 {
			t.Errorf("a caller lists %d payments of this amount, want only its own", got)
		}
	}
	if r := mustSend(t, "GET", "/payments/"+pa.ID, "", map[string]string{"Authorization": bob}); r.status != 404 {
		t.Errorf("bob reads alice's payment: got %d %s, want 404", r.status, r.body)
	}
}

// TestStoreOutage stops DynamoDB mid-run. It wipes every table (dynalite
// keeps them in memory), so it runs last.
func TestStoreOutage(t *testing.T) {
	needStack(t)
	// A warm environment first, so the outage hits a running function.
	if r := pay(t, newKey(), newCharge("tok_visa"), ""); r.status != 201 {
		t.Fatalf("before the outage: got %d %s, want 201", r.status, r.body)
	}
	if err := db.Stop(); err != nil {
		t.Fatal(err)
	}
	restarted := false
	defer func() {
		if !restarted {
			if err := db.Restart(context.Background()); err == nil {
				_ = createTables(context.Background())
			}
		}
	}()

	key, c := newKey(), newCharge("tok_visa")
	r := pay(t, key, c, "")
	if r.status != 503 || problemOf(r).Status != 503 {
		t.Errorf("during the outage: got %d %s, want a 503 problem", r.status, r.body)
	}
	if ra, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || ra < 1 {
		t.Errorf("during the outage: got Retry-After %q, want whole seconds >= 1", r.header.Get("Retry-After"))
	}
	if strings.Contains(output.String(), fmt.Sprintf(`"amount":%d,`, c.Amount)) {
		t.Errorf("the function logged a charge of the outage's amount %d: the handler ran", c.Amount)
	}

	if err := db.Restart(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := createTables(context.Background()); err != nil {
		t.Fatal(err)
	}
	restarted = true
	// The restart emptied the payments table, so it cannot tell whether the
	// refused request was charged: the log check above does.
	var after reply
	if !eventually(patience, 200*time.Millisecond, func() bool {
		after = pay(t, key, c, "")
		return after.status == 201
	}) {
		t.Fatalf("after the restart: got %d %s, want 201", after.status, after.body)
	}
	if got := charged(t, c); got != 1 {
		t.Errorf("got %d payments after the restart, want 1", got)
	}
}

// TestUnauthenticatedRefused: every route is behind AWS_IAM, as deployed;
// the local gateway refuses an unsigned request with 403 before the
// function runs, as API Gateway does.
func TestUnauthenticatedRefused(t *testing.T) {
	needStack(t)
	for _, tt := range []struct{ method, path, body string }{
		{"POST", "/payments", newCharge("tok_visa").JSON()},
		{"GET", "/payments", ""},
		{"GET", "/payments/pay_x", ""},
	} {
		req, err := http.NewRequest(tt.method, baseURL+tt.path, strings.NewReader(tt.body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Idempotency-Key", newKey())
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 403 {
			t.Errorf("%s %s unsigned: got %d, want 403", tt.method, tt.path, resp.StatusCode)
		}
	}
}
