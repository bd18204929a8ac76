package e2e

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// client talks to the gateway. It has its own transport so that many
// concurrent requests do not queue on a few connections.
var client = &http.Client{
	Transport: &http.Transport{MaxIdleConnsPerHost: 256, MaxConnsPerHost: 0},
	Timeout:   60 * time.Second,
}

// reply is an HTTP response, read completely.
type reply struct {
	status int
	header http.Header
	body   []byte
}

func (r reply) replayed() bool { return r.header.Get("Idempotent-Replayed") == "true" }

// send makes one request to the gateway. headers with an empty value are
// left out.
func send(method, path, body string, headers map[string]string) (reply, error) {
	return sendTo(baseURL, method, path, body, headers)
}

// sendTo is send to the gateway at base.
func sendTo(base, method, path, body string, headers map[string]string) (reply, error) {
	req, err := http.NewRequest(method, base+path, strings.NewReader(body))
	if err != nil {
		return reply{}, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	// Every route is behind AWS_IAM: an unsigned request gets 403 at the
	// gateway. A request that names no caller is signed as defaultCaller.
	req.Header.Set("Authorization", signedBy(defaultCaller))
	for k, v := range headers {
		if v != "" {
			req.Header.Set(k, v)
		}
	}
	resp, err := client.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return reply{status: resp.StatusCode, header: resp.Header, body: b}, err
}

// mustSend is send that fails the test on a transport error.
func mustSend(t *testing.T, method, path, body string, headers map[string]string) reply {
	t.Helper()
	r, err := send(method, path, body, headers)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return r
}

// charge is the body of POST /payments.
type charge struct {
	Amount   int    `json:"amount"`
	Currency string `json:"currency"`
	Source   string `json:"source"`
}

func (c charge) JSON() string {
	b, _ := json.Marshal(c)
	return string(b)
}

// amounts makes every test's charges distinguishable in the payments list.
var amounts atomic.Int64

// The API accepts amounts up to 99,999,999; each run starts at a random
// multiple of 1000 below 90,000,000.
func init() { amounts.Store(time.Now().UnixNano() % 90_000 * 1000) }

// newCharge returns a charge with an amount no other charge of this run
// has, so that counting payments of that amount counts this test's
// charges.
func newCharge(source string) charge {
	return charge{Amount: int(amounts.Add(1)), Currency: "EUR", Source: source}
}

// newKey returns a fresh idempotency key.
func newKey() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "e2e-" + hex.EncodeToString(b[:])
}

// pay posts c with an Idempotency-Key (none when key is empty), signed as
// the caller whose Authorization header is auth (signedBy; "" for
// defaultCaller).
func pay(t *testing.T, key string, c charge, auth string) reply {
	t.Helper()
	h := map[string]string{"Idempotency-Key": key, "Authorization": auth}
	return mustSend(t, "POST", "/payments", c.JSON(), h)
}

// defaultCaller is the IAM caller of requests that name none.
const defaultCaller = "e2e"

// signedBy returns a SigV4 Authorization header for the access key ID
// caller, as curl --aws-sigv4 sends it. The local gateway checks its
// form, not its signature, and takes the access key ID as the caller.
func signedBy(caller string) string {
	return "AWS4-HMAC-SHA256 Credential=" + caller + "/20260101/us-east-1/execute-api/aws4_request, SignedHeaders=host;x-amz-date, Signature=00"
}

// payment is a payment as the API returns it.
type payment struct {
	ID       string `json:"id"`
	Amount   int    `json:"amount"`
	Currency string `json:"currency"`
	Source   string `json:"source"`
	Status   string `json:"status"`
}

// payments lists every payment of the callers whose Authorization headers
// are auths (none: defaultCaller), following the pagination.
func payments(t *testing.T, auths ...string) []payment {
	t.Helper()
	if len(auths) == 0 {
		auths = []string{""}
	}
	var all []payment
	for _, auth := range auths {
		all = append(all, paymentsOf(t, auth)...)
	}
	return all
}

// paymentsOf lists one caller's payments.
func paymentsOf(t *testing.T, auth string) []payment {
	t.Helper()
	var all []payment
	path := "/payments?limit=100"
	for range 1000 {
		r := mustSend(t, "GET", path, "", map[string]string{"Authorization": auth})
		if r.status != 200 {
			t.Fatalf("GET %s: got %d %s, want 200", path, r.status, r.body)
		}
		var page struct {
			Payments []payment `json:"payments"`
			Next     string    `json:"next"`
		}
		if err := json.Unmarshal(r.body, &page); err != nil {
			t.Fatalf("GET %s: %v: %s", path, err, r.body)
		}
		all = append(all, page.Payments...)
		if page.Next == "" {
			return all
		}
		path = "/payments?limit=100&next=" + url.QueryEscape(page.Next)
	}
	t.Fatal("GET /payments: more than 1000 pages")
	return nil
}

// chargesOf counts the payments of c's amount by status: "succeeded" ones
// are what was charged; declined charges are recorded too.
func chargesOf(t *testing.T, c charge, auths ...string) map[string]int {
	t.Helper()
	n := map[string]int{}
	for _, p := range payments(t, auths...) {
		if p.Amount == c.Amount {
			n[p.Status]++
		}
	}
	return n
}

// charged counts the succeeded payments of c's amount.
func charged(t *testing.T, c charge, auths ...string) int {
	t.Helper()
	return chargesOf(t, c, auths...)["succeeded"]
}

// problem is an RFC 9457 problem body.
type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
}

func problemOf(r reply) problem {
	var p problem
	_ = json.Unmarshal(r.body, &p)
	return p
}

// patience bounds the waits for the stack's processes (a claim to appear,
// a lease to run out, a restarted endpoint to answer). It is generous
// because a machine busy with a parallel test run can take many seconds to
// schedule a process; a wait returns as soon as its condition holds.
const patience = 2 * time.Minute

// eventually polls cond every interval until it holds or timeout passes.
// It is for waiting on real time that the system under test needs (a
// lease running out), never a fixed sleep.
func eventually(timeout, interval time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(interval)
	}
}

// sameReply reports whether a replay carries the first reply's status and
// body byte for byte.
func sameReply(a, b reply) bool {
	return a.status == b.status && bytes.Equal(a.body, b.body)
}
