package dedupe_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/memstore"
)

// fuzzHeaders parses "name:value" lines into pairs, in order. Lines
// without a colon are skipped; names that are not HTTP tokens are
// dropped when tokens is set (API Gateway never delivers them).
func fuzzHeaders(s string, tokens bool) [][2]string {
	var out [][2]string
	for line := range strings.SplitSeq(s, "\n") {
		name, value, ok := strings.Cut(line, ":")
		if !ok || (tokens && !isToken(name)) {
			continue
		}
		out = append(out, [2]string{name, value})
	}
	return out
}

// isToken reports whether s is an RFC 9110 token, as header names are.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// fuzzLines splits s into its non-empty lines.
func fuzzLines(s string) []string {
	var out []string
	for l := range strings.SplitSeq(s, "\n") {
		if l != "" {
			out = append(out, l)
		}
	}
	return out
}

// apigwWire renders a response as API Gateway sends it to the client:
// the status, every header line (lower-case name and value, sorted, with
// payload 1.0's headers and multiValueHeaders merged and payload 2.0's
// cookies as Set-Cookie lines) without Idempotent-Replayed, and the body
// decoded from base64 (or marked undecodable: API Gateway would answer
// 500 to both).
func apigwWire(status int, single map[string]string, multi map[string][]string, cookies []string, body string, b64 bool) string {
	var lines []string
	add := func(k, v string) {
		if !strings.EqualFold(k, dedupe.HeaderReplayed) {
			lines = append(lines, strings.ToLower(k)+": "+v)
		}
	}
	for k, v := range single {
		if !slices.Contains(multi[k], v) {
			add(k, v)
		}
	}
	for k, vs := range multi {
		for _, v := range vs {
			add(k, v)
		}
	}
	for _, c := range cookies {
		add("set-cookie", c)
	}
	slices.Sort(lines)
	if b64 {
		if dec, err := base64.StdEncoding.DecodeString(body); err == nil {
			body = string(dec)
		} else {
			body = "undecodable base64: " + body
		}
	}
	return fmt.Sprintf("%d\n%s\n\n%q", status, strings.Join(lines, "\n"), body)
}

// fuzzResponse is what the fuzzed handler answers.
type fuzzResponse struct {
	status  int
	headers [][2]string
	cookies []string
	body    string
	b64     bool
}

func newFuzzResponse(status uint16, headers, cookies string, body []byte, b64 bool) fuzzResponse {
	r := fuzzResponse{status: 100 + int(status)%500, headers: fuzzHeaders(headers, true), cookies: fuzzLines(cookies), body: string(body), b64: b64}
	// A leading '~' sends the bytes as they are under isBase64Encoded,
	// which may not be base64 at all.
	if b64 && !strings.HasPrefix(r.body, "~") {
		r.body = base64.StdEncoding.EncodeToString(body)
	}
	return r
}

// single returns the headers as a payload 2.0 or Function URL response
// carries them: one value per name, the last one winning.
func (r fuzzResponse) single() map[string]string {
	h := map[string]string{}
	for _, kv := range r.headers {
		h[kv[0]] = kv[1]
	}
	return h
}

// FuzzAdapterReplay sends one fuzzed request twice through HTTPAPI,
// RESTAPI and FunctionURL over memstore: base64 and plain bodies, odd and
// repeated request headers, cookies, and a fuzzed handler response
// (any status, repeated and odd headers, Set-Cookie in headers and in
// cookies, binary and invalid base64 bodies). The handler must run once,
// and the second answer must be a replay that the client cannot tell from
// the first, byte for byte, once both went through the Lambda runtime's
// JSON and API Gateway's rendering.
func FuzzAdapterReplay(f *testing.F) {
	f.Add([]byte(`{"amount":1250,"currency":"EUR","source":"tok_visa"}`), false, "content-type:application/json\nx-a:1\nX-A:2", "a=1\nb=2",
		uint16(101), "Content-Type:application/json\nLocation:/payments/pay_1", "session=abc; Path=/; HttpOnly", []byte(`{"id":"pay_1"}`), false)
	f.Add([]byte{0, 1, 0xfe, 0xff}, true, "content-type:image/png", "", uint16(100), "Content-Type:image/png\nSet-Cookie:x=1", "y=2", []byte("\x89PNG\r\n\x1a\n\x00\xff"), true)
	f.Add([]byte("not json"), true, "", "", uint16(302), "X-Latin:caf\xe9\nx-latin:\xff", "", []byte("~not*base64"), true)
	f.Add([]byte(`{"a":1,"a":2}`), false, "cookie:c=1; d=2\nIdempotency-Key:other", "", uint16(422), "Set-Cookie:a\nset-cookie:b\nX:1\nX:2", "c\nd", []byte{}, false)
	f.Add([]byte("\xff\xfe"), false, ":weird:\x00", "=\n;", uint16(404), ":dedupe-body:base64\nX-Empty:", "", []byte("x"), false)
	f.Fuzz(func(t *testing.T, reqBody []byte, reqB64 bool, reqHeaders, reqCookies string, status uint16, respHeaders, respCookies string, respBody []byte, respB64 bool) {
		resp := newFuzzResponse(status, respHeaders, respCookies, respBody, respB64)
		hdrs := fuzzHeaders(reqHeaders, false)
		cookies := fuzzLines(reqCookies)
		body := string(reqBody)
		if reqB64 {
			body = base64.StdEncoding.EncodeToString(reqBody)
		}
		cfg := &dedupe.HTTPConfig{Keep: func(int) bool { return true }, FingerprintHeaders: []string{"Cookie", "X-A"}}
		isKey := func(name string) bool { return strings.EqualFold(name, dedupe.HeaderIdempotencyKey) }

		t.Run("HTTPAPI", func(t *testing.T) {
			var ev events.APIGatewayV2HTTPRequest
			fixture(t, "apigw-v2-jwt.json", &ev)
			ev.Headers = map[string]string{"idempotency-key": "fuzz-1"}
			for _, kv := range hdrs {
				if !isKey(kv[0]) {
					ev.Headers[strings.ToLower(kv[0])] = kv[1]
				}
			}
			ev.Cookies, ev.Body, ev.IsBase64Encoded = cookies, body, reqB64
			runs := 0
			h := dedupe.HTTPAPI(dedupe.New(memstore.New(), nil), cfg, func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
				runs++
				return events.APIGatewayV2HTTPResponse{StatusCode: resp.status, Headers: resp.single(), Cookies: resp.cookies, Body: resp.body, IsBase64Encoded: resp.b64}, nil
			})
			wire := func() (string, bool) {
				r, err := h(context.Background(), ev)
				if err != nil {
					t.Fatalf("HTTPAPI: %v", err)
				}
				r = viaRuntime(t, r)
				return apigwWire(r.StatusCode, r.Headers, nil, r.Cookies, r.Body, r.IsBase64Encoded), r.Headers[dedupe.HeaderReplayed] == "true"
			}
			checkReplay(t, wire, &runs)
		})

		t.Run("RESTAPI", func(t *testing.T) {
			var ev events.APIGatewayProxyRequest
			fixture(t, "apigw-v1-cognito.json", &ev)
			ev.Headers = map[string]string{"Idempotency-Key": "fuzz-1"}
			ev.MultiValueHeaders = map[string][]string{"Idempotency-Key": {"fuzz-1"}}
			for _, kv := range hdrs {
				if !isKey(kv[0]) {
					ev.Headers[kv[0]] = kv[1]
					ev.MultiValueHeaders[kv[0]] = append(ev.MultiValueHeaders[kv[0]], kv[1])
				}
			}
			if len(cookies) > 0 {
				ev.Headers["Cookie"] = strings.Join(cookies, "; ")
				ev.MultiValueHeaders["Cookie"] = []string{ev.Headers["Cookie"]}
			}
			ev.Body, ev.IsBase64Encoded = body, reqB64
			single, multi := resp.single(), map[string][]string{}
			for _, kv := range resp.headers {
				multi[kv[0]] = append(multi[kv[0]], kv[1])
			}
			if len(resp.cookies) > 0 {
				multi["Set-Cookie"] = append(multi["Set-Cookie"], resp.cookies...)
			}
			runs := 0
			h := dedupe.RESTAPI(dedupe.New(memstore.New(), nil), cfg, func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
				runs++
				return events.APIGatewayProxyResponse{StatusCode: resp.status, Headers: single, MultiValueHeaders: multi, Body: resp.body, IsBase64Encoded: resp.b64}, nil
			})
			wire := func() (string, bool) {
				r, err := h(context.Background(), ev)
				if err != nil {
					t.Fatalf("RESTAPI: %v", err)
				}
				r = viaRuntime(t, r)
				return apigwWire(r.StatusCode, r.Headers, r.MultiValueHeaders, nil, r.Body, r.IsBase64Encoded), r.Headers[dedupe.HeaderReplayed] == "true"
			}
			checkReplay(t, wire, &runs)
		})

		t.Run("FunctionURL", func(t *testing.T) {
			var ev events.LambdaFunctionURLRequest
			fixture(t, "function-url-iam.json", &ev)
			ev.Headers = map[string]string{"idempotency-key": "fuzz-1"}
			for _, kv := range hdrs {
				if !isKey(kv[0]) {
					ev.Headers[strings.ToLower(kv[0])] = kv[1]
				}
			}
			ev.Cookies, ev.Body, ev.IsBase64Encoded = cookies, body, reqB64
			runs := 0
			h := dedupe.FunctionURL(dedupe.New(memstore.New(), nil), cfg, func(context.Context, events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error) {
				runs++
				return events.LambdaFunctionURLResponse{StatusCode: resp.status, Headers: resp.single(), Cookies: resp.cookies, Body: resp.body, IsBase64Encoded: resp.b64}, nil
			})
			wire := func() (string, bool) {
				r, err := h(context.Background(), ev)
				if err != nil {
					t.Fatalf("FunctionURL: %v", err)
				}
				r = viaRuntime(t, r)
				return apigwWire(r.StatusCode, r.Headers, nil, r.Cookies, r.Body, r.IsBase64Encoded), r.Headers[dedupe.HeaderReplayed] == "true"
			}
			checkReplay(t, wire, &runs)
		})
	})
}

// checkReplay sends a request twice through wire and checks that the
// handler ran once and that the second answer is a replay equal to the
// first on the wire.
func checkReplay(t *testing.T, wire func() (string, bool), runs *int) {
	t.Helper()
	first, replayed := wire()
	if *runs != 1 || replayed {
		t.Fatalf("first request: handler ran %d times, replayed %v; want 1, false:\n%s", *runs, replayed, first)
	}
	again, replayed := wire()
	if *runs != 1 || !replayed {
		t.Fatalf("retry: handler ran %d times, replayed %v; want 1, true:\n%s", *runs, replayed, again)
	}
	if again != first {
		t.Fatalf("replay differs from the first answer:\n got %s\nwant %s", again, first)
	}
}
