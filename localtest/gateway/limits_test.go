package gateway

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
)

// TestPlatformLimits sends requests at and just over each limit the
// gateway enforces for AWS, through echofn under the real emulator: API
// Gateway's 10 MB body and 10240-byte request line and header values, and
// Lambda's 6 MB invocation payload on the event and on the response. Each
// limit is answered as AWS answers it, the function never sees an
// oversized event, and no execution environment is replaced.
func TestPlatformLimits(t *testing.T) {
	// The timeouts are generous: moving 6 MB through the emulator took
	// over 5 s on a saturated machine, and a timeout is not what this
	// test is about.
	pool, out := newEchoPool(t, func(c *PoolConfig) {
		c.MaxConcurrency = 1
		c.Function.Timeout = heldTimeout
	})
	g, err := New(Config{Routes: []Route{{Key: "ANY /echo/{id}", Function: pool}}, IntegrationTimeout: patience})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g)
	defer srv.Close()

	// The event around a body: the body itself (raw JSON text, escaped in
	// the event) plus requestContext, headers and so on, well under 4 KB.
	const eventOverhead = 4 << 10
	tests := []struct {
		name       string
		method     string
		query      string
		body       []byte
		binary     bool // sent as application/octet-stream: base64 in the event
		header     int  // bytes of one extra header value
		wantStatus int
		wantBody   string // "" for the function's answer
		invoked    bool
	}{
		{name: "body under the event limit", query: "raw=1", body: jsonString(DefaultMaxPayloadBytes - eventOverhead), wantStatus: 200, invoked: true},
		{name: "body fits API Gateway but not the event limit", query: "raw=1", body: jsonString(DefaultMaxPayloadBytes + 1), wantStatus: 413, wantBody: `{"message":"Request Entity Too Large"}`},
		{name: "binary body whose base64 outgrows the event limit", binary: true, body: make([]byte, DefaultMaxPayloadBytes/4*3+1), wantStatus: 413, wantBody: `{"message":"Request Entity Too Large"}`},
		{name: "body at API Gateway's limit", body: make([]byte, DefaultMaxBodyBytes), binary: true, wantStatus: 413, wantBody: `{"message":"Request Entity Too Large"}`},
		{name: "body over API Gateway's limit", body: make([]byte, DefaultMaxBodyBytes+1), binary: true, wantStatus: 413, wantBody: `{"message":"Request Entity Too Large"}`},
		{name: "response at the payload limit", method: "GET", query: "big=" + strconv.Itoa(DefaultMaxPayloadBytes-64), wantStatus: 200, invoked: true},
		{name: "response over the payload limit", method: "GET", query: "big=" + strconv.Itoa(DefaultMaxPayloadBytes), wantStatus: 500, wantBody: `{"message":"Internal Server Error"}`, invoked: true},
		{name: "headers under the header limit", method: "GET", header: DefaultMaxHeaderBytes - 200, wantStatus: 200, invoked: true},
		{name: "headers over the header limit", method: "GET", header: DefaultMaxHeaderBytes, wantStatus: 431, wantBody: `{"message":"Request Header Fields Too Large"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := pool.Stats()
			method := tt.method
			if method == "" {
				method = "POST"
			}
			req, err := http.NewRequest(method, srv.URL+"/echo/1?"+tt.query, bytes.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			if tt.binary {
				req.Header.Set("Content-Type", "application/octet-stream")
			} else if tt.body != nil {
				req.Header.Set("Content-Type", "application/json")
			}
			if tt.header > 0 {
				req.Header.Set("X-Padding", strings.Repeat("p", tt.header))
			}
			resp, body := do(t, req)
			if resp.StatusCode != tt.wantStatus || (tt.wantBody != "" && string(body) != tt.wantBody) {
				t.Errorf("got %d %.80s, want %d %s", resp.StatusCode, body, tt.wantStatus, tt.wantBody)
			}
			after := pool.Stats()
			if got := after.Invocations - before.Invocations; got != map[bool]int{false: 0, true: 1}[tt.invoked] {
				t.Errorf("got %d invocations, want invoked %v", got, tt.invoked)
			}
			if after.Replaced != before.Replaced {
				t.Errorf("the environment was replaced: %d -> %d", before.Replaced, after.Replaced)
			}
		})
	}
	// Still healthy: the same warm environment answers.
	resp, body := do(t, mustRequest(t, "GET", srv.URL+"/echo/2"))
	if s := pool.Stats(); resp.StatusCode != 200 || s.Started != 1 || s.Replaced != 0 {
		t.Errorf("after the limits: got %d %.80s with %d environments started, %d replaced; want 200 from the one warm environment", resp.StatusCode, body, s.Started, s.Replaced)
	}
	if t.Failed() {
		t.Logf("pool output:\n%s", out)
	}
}

// jsonString returns a JSON string literal of n bytes in all.
func jsonString(n int) []byte {
	b := bytes.Repeat([]byte("j"), n)
	b[0], b[n-1] = '"', '"'
	return b
}
