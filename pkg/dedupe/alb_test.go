package dedupe_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/memstore"
)

// The ALB adapter in the behaviour harness, and what is particular to
// ALB: its two header modes, the target group scope and the verified
// user claims.

const (
	testALBArn    = "arn:aws:elasticloadbalancing:us-east-2:123456789012:loadbalancer/app/payments/50dc6c495c0c9188"
	testALBKid    = "12345678-1234-1234-1234-123456789012"
	testALBIssuer = "https://idp.example.com"
	testTGArn     = "arn:aws:elasticloadbalancing:us-east-2:123456789012:targetgroup/payments/6d0ecf831eec9f09"
)

// testALBKey is the load balancer's signing key in these tests.
var testALBKey = sync.OnceValue(func() *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	return k
})

// testALBExp is when the test tokens expire: long after the test clock
// (newTestClock) and the real one (ExampleALB).
var testALBExp = time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)

// testALBAuth is an ALBAuth whose key source knows testALBKid only.
func testALBAuth() *dedupe.ALBAuth {
	return &dedupe.ALBAuth{LoadBalancerARN: testALBArn, PublicKey: func(_ context.Context, kid string) (*ecdsa.PublicKey, error) {
		if kid == testALBKid {
			return &testALBKey().PublicKey, nil
		}
		return nil, nil
	}}
}

// albHeader is the JOSE header ALB signs user claims with.
func albHeader() map[string]any {
	return map[string]any{"typ": "JWT", "alg": "ES256", "kid": testALBKid, "signer": testALBArn,
		"iss": testALBIssuer, "client": "client-1", "exp": testALBExp.Unix()}
}

// albToken signs header and claims with key as ALB does: ES256, each
// part base64url-encoded with its padding.
func albToken(key *ecdsa.PrivateKey, header, claims map[string]any) string {
	return signToken(base64.URLEncoding, key, header, claims)
}

// signToken is albToken with the given encoding of the parts.
func signToken(b64 *base64.Encoding, key *ecdsa.PrivateKey, header, claims map[string]any) string {
	enc := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			panic(err)
		}
		return b64.EncodeToString(b)
	}
	signed := enc(header) + "." + enc(claims)
	sum := sha256.Sum256([]byte(signed))
	r, s, err := ecdsa.Sign(rand.Reader, key, sum[:])
	if err != nil {
		panic(err)
	}
	sig := make([]byte, 64)
	r.FillBytes(sig[:32])
	s.FillBytes(sig[32:])
	return signed + "." + b64.EncodeToString(sig)
}

// signRaw signs header and claims given as JSON text, to control their
// member names and order.
func signRaw(key *ecdsa.PrivateKey, header, claims string) string {
	signed := base64.URLEncoding.EncodeToString([]byte(header)) + "." + base64.URLEncoding.EncodeToString([]byte(claims))
	sum := sha256.Sum256([]byte(signed))
	r, s, err := ecdsa.Sign(rand.Reader, key, sum[:])
	if err != nil {
		panic(err)
	}
	sig := make([]byte, 64)
	r.FillBytes(sig[:32])
	s.FillBytes(sig[32:])
	return signed + "." + base64.URLEncoding.EncodeToString(sig)
}

// userToken is ALB's token for user sub.
func userToken(sub string) string {
	return albToken(testALBKey(), albHeader(), map[string]any{"sub": sub, "email": sub + "@example.com"})
}

// wrapALB builds the ALB invoker of the harness, in single-value or
// multi-value mode; callers are identified by verified user claims
// (ALBAuth) unless the scenario sets a Principal.
func wrapALB(multi bool) func(t testing.TB, g *dedupe.Guard, cfg *dedupe.HTTPConfig, h handlerFunc) invoker {
	return func(t testing.TB, g *dedupe.Guard, cfg *dedupe.HTTPConfig, h handlerFunc) invoker {
		var c dedupe.HTTPConfig
		if cfg != nil {
			c = *cfg
		}
		if c.Principal == nil {
			c.ALBAuth = testALBAuth()
		}
		var base events.ALBTargetGroupRequest
		name := "alb-target-group.json"
		if multi {
			name = "alb-target-group-multi.json"
		}
		fixture(t, name, &base)
		raw, _ := json.Marshal(base)
		wrapped := dedupe.ALB(g, &c, func(ctx context.Context, ev events.ALBTargetGroupRequest) (events.ALBTargetGroupResponse, error) {
			r, err := h(ctx, decodeBody(t, ev.Body, ev.IsBase64Encoded))
			if err != nil {
				return events.ALBTargetGroupResponse{}, err
			}
			out := events.ALBTargetGroupResponse{StatusCode: r.status, StatusDescription: fmt.Sprintf("%d %s", r.status, http.StatusText(r.status))}
			if multi {
				out.MultiValueHeaders = map[string][]string{}
				for k, v := range r.headers {
					out.MultiValueHeaders[k] = []string{v}
				}
				if len(r.cookies) > 0 {
					out.MultiValueHeaders["Set-Cookie"] = r.cookies
				}
			} else {
				out.Headers = maps.Clone(r.headers)
				if len(r.cookies) > 0 {
					if out.Headers == nil {
						out.Headers = map[string]string{}
					}
					out.Headers["Set-Cookie"] = r.cookies[len(r.cookies)-1] // all a single-value response holds
				}
			}
			out.Body, out.IsBase64Encoded = encodeBody(r.body, r.base64), r.base64
			return out, nil
		})
		return func(ctx context.Context, r request) (wire, error) {
			var ev events.ALBTargetGroupRequest
			json.Unmarshal(raw, &ev)
			ev.HTTPMethod = r.method
			ev.Path = r.path
			for k, v := range r.params {
				ev.Path = strings.ReplaceAll(ev.Path, "{"+k+"}", v)
			}
			name := cmpOr(r.keyName, "idempotency-key")
			hdr := map[string][]string{}
			if len(r.keys) > 0 {
				hdr[name] = r.keys
			}
			for k, v := range r.headers {
				hdr[strings.ToLower(k)] = []string{v}
			}
			if r.principal != "" {
				hdr["x-amzn-oidc-data"] = []string{userToken(r.principal)}
				hdr["x-amzn-oidc-identity"] = []string{r.principal}
				hdr["x-amzn-oidc-accesstoken"] = []string{"eyJ-access-token"}
			}
			if multi {
				maps.DeleteFunc(ev.MultiValueHeaders, func(k string, _ []string) bool { return strings.EqualFold(k, "idempotency-key") })
				maps.Copy(ev.MultiValueHeaders, hdr)
			} else {
				maps.DeleteFunc(ev.Headers, func(k string, _ string) bool { return strings.EqualFold(k, "idempotency-key") })
				for k, vs := range hdr {
					ev.Headers[k] = vs[len(vs)-1] // ALB keeps the last value
				}
			}
			ev.Body, ev.IsBase64Encoded = encodeBody(r.body, r.base64), r.base64
			resp, err := wrapped(ctx, ev)
			resp = viaRuntime(t, resp)
			w := wire{status: resp.StatusCode, header: map[string][]string{}, body: decodeBody(t, resp.Body, resp.IsBase64Encoded)}
			if err != nil {
				return w, err
			}
			if want := strconv.Itoa(resp.StatusCode) + " "; !strings.HasPrefix(resp.StatusDescription, want) {
				t.Errorf("statusDescription %q, want it to start with %q", resp.StatusDescription, want)
			}
			if multi {
				if len(resp.Headers) > 0 {
					t.Errorf("multi-value request answered with single-value headers %v", resp.Headers)
				}
				w.header = lowerKeys(resp.MultiValueHeaders)
			} else {
				if len(resp.MultiValueHeaders) > 0 {
					t.Errorf("single-value request answered with multi-value headers %v", resp.MultiValueHeaders)
				}
				for k, v := range resp.Headers {
					w.header[strings.ToLower(k)] = []string{v}
				}
			}
			return w, nil
		}
	}
}

// albEnv is one ALB function for the tests below: a guard on a fresh
// memstore with a manual clock, the events it emitted, and how often the
// handler ran.
type albEnv struct {
	clock *testClock
	runs  int
	evs   []dedupe.Event
	h     func(context.Context, events.ALBTargetGroupRequest) (events.ALBTargetGroupResponse, error)
}

func newALBEnv(t *testing.T, cfg *dedupe.HTTPConfig) *albEnv {
	t.Helper()
	e := &albEnv{clock: newTestClock()}
	g := dedupe.New(memstore.New(), &dedupe.Config{Now: e.clock.Now, OnOutcome: func(_ context.Context, ev dedupe.Event) { e.evs = append(e.evs, ev) }})
	e.h = dedupe.ALB(g, cfg, func(_ context.Context, req events.ALBTargetGroupRequest) (events.ALBTargetGroupResponse, error) {
		e.runs++
		return events.ALBTargetGroupResponse{StatusCode: 201, StatusDescription: "201 Created", Headers: map[string]string{"Content-Type": "application/json"},
			Body: fmt.Sprintf(`{"run":%d}`, e.runs)}, nil
	})
	return e
}

// albRequest is the single-value fixture with key and user claims
// token ("" for none).
func albRequest(t *testing.T, key, token string) events.ALBTargetGroupRequest {
	t.Helper()
	var ev events.ALBTargetGroupRequest
	fixture(t, "alb-target-group.json", &ev)
	ev.Headers["idempotency-key"] = key
	if token != "" {
		ev.Headers["x-amzn-oidc-data"] = token
	}
	return ev
}

func (e *albEnv) send(t *testing.T, ev events.ALBTargetGroupRequest) events.ALBTargetGroupResponse {
	t.Helper()
	resp, err := e.h(context.Background(), ev)
	if err != nil {
		t.Fatalf("handler error: %v", err)
	}
	return resp
}

// albProblem returns the problem type of an answer, "" if it is none.
func albProblem(resp events.ALBTargetGroupResponse) string {
	var p dedupe.Problem
	if resp.Headers["Content-Type"] != dedupe.ProblemContentType || json.Unmarshal([]byte(resp.Body), &p) != nil {
		return ""
	}
	return p.Type
}

// TestALBSingleValueKeepsLastHeader: without multi-value headers ALB
// delivers only the last of repeated headers, so a repeated key is the
// last key (the multi-value mode refuses it: the behaviour table).
func TestALBSingleValueKeepsLastHeader(t *testing.T) {
	e := newALBEnv(t, &dedupe.HTTPConfig{ALBAuth: testALBAuth()})
	first := e.send(t, albRequest(t, "second", userToken("alice")))
	again := e.send(t, albRequest(t, "second", userToken("alice")))
	if first.StatusCode != 201 || again.Headers[dedupe.HeaderReplayed] != "true" || e.runs != 1 {
		t.Errorf("got %d then %v after %d runs; want 201, then its replay", first.StatusCode, again.Headers, e.runs)
	}
}

// TestALBUserClaims attacks the identity check: every token that is not
// one the load balancer signed for this request is refused with 401,
// before anything is claimed or run, and never becomes a principal.
func TestALBUserClaims(t *testing.T) {
	key := testALBKey()
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	claims := map[string]any{"sub": "alice"}
	with := func(k string, v any) map[string]any {
		h := albHeader()
		if v == nil {
			delete(h, k)
		} else {
			h[k] = v
		}
		return h
	}
	good := userToken("alice")
	parts := strings.Split(good, ".")
	b64 := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	hb, _ := json.Marshal(albHeader())
	hdrJSON := string(hb)
	hsHeader := b64(`{"alg":"HS256","kid":"` + testALBKid + `","signer":"` + testALBArn + `","exp":1930000000}`)
	tests := []struct {
		name     string
		token    string
		identity []string // x-amzn-oidc-identity values
		problem  string   // "" means accepted
		status   int
	}{
		{name: "padded token, as ALB sends it", token: good, status: 201},
		{name: "unpadded token (RFC 7515)", token: signToken(base64.RawURLEncoding, key, albHeader(), claims), status: 201},
		{name: "padding stripped after signing", token: strings.ReplaceAll(good, "=", ""), problem: dedupe.ProblemIdentityUnverified},
		{name: "identity header equal to sub", token: good, identity: []string{"alice"}, status: 201},
		{name: "alg none", token: b64(`{"alg":"none","kid":"`+testALBKid+`","signer":"`+testALBArn+`","exp":1930000000}`) + "." + parts[1] + ".", problem: dedupe.ProblemIdentityUnverified},
		{name: "alg HS256 keyed with the public key", token: hsHeader + "." + parts[1] + "." + parts[2], problem: dedupe.ProblemIdentityUnverified},
		{name: "alg ES384", token: albToken(key, with("alg", "ES384"), claims), problem: dedupe.ProblemIdentityUnverified},
		{name: "another load balancer signed it", token: albToken(key, with("signer", strings.Replace(testALBArn, "50dc", "ffff", 1)), claims), problem: dedupe.ProblemIdentityUnverified},
		{name: "no signer", token: albToken(key, with("signer", nil), claims), problem: dedupe.ProblemIdentityUnverified},
		{name: "expired", token: albToken(key, with("exp", newTestClock().Now().Unix()-1), claims), problem: dedupe.ProblemIdentityUnverified},
		{name: "expires this second", token: albToken(key, with("exp", newTestClock().Now().Unix()), claims), problem: dedupe.ProblemIdentityUnverified},
		{name: "no exp", token: albToken(key, with("exp", nil), claims), problem: dedupe.ProblemIdentityUnverified},
		{name: "exp not a number", token: albToken(key, with("exp", "soon"), claims), problem: dedupe.ProblemIdentityUnverified},
		{name: "exp NaN", token: albToken(key, with("exp", "NaN"), claims), problem: dedupe.ProblemIdentityUnverified},
		{name: "exp Inf", token: albToken(key, with("exp", "Inf"), claims), problem: dedupe.ProblemIdentityUnverified},
		{name: "exp huge", token: signRaw(key, strings.Replace(hdrJSON, `"exp":4102444800`, `"exp":1e999`, 1), `{"sub":"alice"}`), problem: dedupe.ProblemIdentityUnverified},
		{name: "exp as a string of digits", token: albToken(key, with("exp", "4102444800"), claims), status: 201},
		{name: "claims exp NaN", token: albToken(key, albHeader(), map[string]any{"sub": "alice", "exp": "NaN"}), problem: dedupe.ProblemIdentityUnverified},
		{name: "claims exp null", token: albToken(key, albHeader(), map[string]any{"sub": "alice", "exp": nil}), problem: dedupe.ProblemIdentityUnverified},
		{name: "claims expired", token: albToken(key, albHeader(), map[string]any{"sub": "alice", "exp": 1}), problem: dedupe.ProblemIdentityUnverified},
		{name: "kid with path traversal", token: albToken(key, with("kid", "../../"+testALBKid), claims), problem: dedupe.ProblemIdentityUnverified},
		{name: "kid with a slash", token: albToken(key, with("kid", "a/b"), claims), problem: dedupe.ProblemIdentityUnverified},
		{name: "kid with a query", token: albToken(key, with("kid", testALBKid+"?x=1"), claims), problem: dedupe.ProblemIdentityUnverified},
		{name: "kid with a fragment", token: albToken(key, with("kid", testALBKid+"#"), claims), problem: dedupe.ProblemIdentityUnverified},
		{name: "kid percent-encoded", token: albToken(key, with("kid", "%2e%2e%2f"), claims), problem: dedupe.ProblemIdentityUnverified},
		{name: "kid with a host", token: albToken(key, with("kid", "@evil.example"), claims), problem: dedupe.ProblemIdentityUnverified},
		{name: "kid too long", token: albToken(key, with("kid", strings.Repeat("a", 65)), claims), problem: dedupe.ProblemIdentityUnverified},
		{name: "kid empty", token: albToken(key, with("kid", ""), claims), problem: dedupe.ProblemIdentityUnverified},
		{name: "kid not a string", token: albToken(key, with("kid", 7), claims), problem: dedupe.ProblemIdentityUnverified},
		{name: "unknown kid", token: albToken(key, with("kid", "00000000-0000-0000-0000-000000000000"), claims), problem: dedupe.ProblemIdentityUnverified},
		{name: "signed by another key", token: albToken(other, albHeader(), claims), problem: dedupe.ProblemIdentityUnverified},
		{name: "claims swapped after signing", token: parts[0] + "." + base64.URLEncoding.EncodeToString([]byte(`{"sub":"mallory"}`)) + "." + parts[2], problem: dedupe.ProblemIdentityUnverified},
		{name: "signature truncated", token: parts[0] + "." + parts[1] + "." + parts[2][:40], problem: dedupe.ProblemIdentityUnverified},
		{name: "signature in the standard alphabet", token: parts[0] + "." + parts[1] + "." + strings.NewReplacer("-", "+", "_", "/").Replace(parts[2]) + "+/", problem: dedupe.ProblemIdentityUnverified},
		// encoding/json matches member names case-insensitively, the
		// last one winning: a claim a user may name ("Sub") must never
		// stand in for "sub", nor "Signer" for "signer".
		{name: "a second sub spelled Sub", token: signRaw(key, hdrJSON, `{"sub":"alice","Sub":"bob"}`), identity: []string{"alice"}, status: 201},
		{name: "only a Sub", token: signRaw(key, hdrJSON, `{"Sub":"bob"}`), problem: dedupe.ProblemIdentityUnverified},
		{name: "ALG in capitals", token: signRaw(key, strings.Replace(hdrJSON, `"alg"`, `"ALG"`, 1), `{"sub":"alice"}`), problem: dedupe.ProblemIdentityUnverified},
		{name: "a second signer spelled Signer", token: signRaw(key, strings.Replace(hdrJSON, `}`, `,"Signer":"x"}`, 1), `{"sub":"alice"}`), status: 201},
		{name: "no sub", token: albToken(key, albHeader(), map[string]any{"email": "a@example.com"}), problem: dedupe.ProblemIdentityUnverified},
		{name: "sub not a string", token: albToken(key, albHeader(), map[string]any{"sub": 42}), problem: dedupe.ProblemIdentityUnverified},
		{name: "identity header differs from sub", token: good, identity: []string{"mallory"}, problem: dedupe.ProblemIdentityUnverified},
		{name: "two parts", token: parts[0] + "." + parts[1], problem: dedupe.ProblemIdentityUnverified},
		{name: "four parts", token: good + ".x", problem: dedupe.ProblemIdentityUnverified},
		{name: "not base64", token: "!!!.???.***", problem: dedupe.ProblemIdentityUnverified},
		{name: "header not JSON", token: b64("alice") + "." + parts[1] + "." + parts[2], problem: dedupe.ProblemIdentityUnverified},
		{name: "huge token", token: albToken(key, albHeader(), map[string]any{"sub": "alice", "pad": strings.Repeat("x", 20<<10)}), problem: dedupe.ProblemIdentityUnverified},
		{name: "identity without data", token: "", identity: []string{"alice"}, problem: dedupe.ProblemIdentityUnverified},
		{name: "no claims at all: no principal", token: "", problem: dedupe.ProblemInternal},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var asked []string
			auth := testALBAuth()
			keys := auth.PublicKey
			auth.PublicKey = func(ctx context.Context, kid string) (*ecdsa.PublicKey, error) {
				asked = append(asked, kid)
				return keys(ctx, kid)
			}
			e := newALBEnv(t, &dedupe.HTTPConfig{ALBAuth: auth})
			ev := albRequest(t, "order-42", tc.token)
			if len(tc.identity) > 0 {
				ev.Headers["x-amzn-oidc-identity"] = tc.identity[0]
			}
			resp := e.send(t, ev)
			if tc.problem == "" {
				if resp.StatusCode != tc.status || e.runs != 1 {
					t.Fatalf("got %d (%s) after %d runs, want %d", resp.StatusCode, resp.Body, e.runs, tc.status)
				}
				return
			}
			want := http.StatusUnauthorized
			if tc.problem == dedupe.ProblemInternal {
				want = http.StatusInternalServerError
			}
			if resp.StatusCode != want || albProblem(resp) != tc.problem || e.runs != 0 {
				t.Errorf("got %d %q after %d runs, want %d %q and no run", resp.StatusCode, albProblem(resp), e.runs, want, tc.problem)
			}
			if resp.StatusDescription != strconv.Itoa(want)+" "+http.StatusText(want) {
				t.Errorf("statusDescription %q", resp.StatusDescription)
			}
			for _, kid := range asked {
				if kid != testALBKid && kid != "00000000-0000-0000-0000-000000000000" {
					t.Errorf("the key source was asked for kid %q", kid)
				}
			}
			if len(e.evs) != 1 || e.evs[0].Outcome != dedupe.OutcomeInvalidRequest || e.evs[0].Status != want {
				t.Errorf("events %+v, want one invalid_request with status %d", e.evs, want)
			}
			if strings.Contains(resp.Body, "alice") || strings.Contains(resp.Body, "mallory") {
				t.Errorf("the answer echoes the token: %s", resp.Body)
			}
		})
	}
}

// TestALBUserClaimsRepeated: two x-amzn-oidc-data values (multi-value
// mode) are refused, whichever is genuine.
func TestALBUserClaimsRepeated(t *testing.T) {
	e := newALBEnv(t, &dedupe.HTTPConfig{ALBAuth: testALBAuth()})
	var ev events.ALBTargetGroupRequest
	fixture(t, "alb-target-group-multi.json", &ev)
	ev.MultiValueHeaders["x-amzn-oidc-data"] = []string{userToken("mallory"), userToken("alice")}
	resp, _ := e.h(context.Background(), ev)
	if resp.StatusCode != 401 || e.runs != 0 || len(resp.MultiValueHeaders["Content-Type"]) != 1 {
		t.Errorf("got %d %v after %d runs, want a multi-value 401 and no run", resp.StatusCode, resp.MultiValueHeaders, e.runs)
	}
}

// TestALBUsersAreScoped: verified users get their own key spaces, and
// their sub, never another header, decides.
func TestALBUsersAreScoped(t *testing.T) {
	e := newALBEnv(t, &dedupe.HTTPConfig{ALBAuth: testALBAuth()})
	alice := e.send(t, albRequest(t, "k", userToken("alice")))
	bob := e.send(t, albRequest(t, "k", userToken("bob")))
	forged := albRequest(t, "k", userToken("alice"))
	forged.Headers["x-forwarded-user"] = "bob"
	again := e.send(t, forged)
	if alice.Body != `{"run":1}` || bob.Body != `{"run":2}` || again.Body != alice.Body || again.Headers[dedupe.HeaderReplayed] != "true" {
		t.Errorf("alice %s, bob %s, alice again %s %v; want runs 1, 2 and alice's replay", alice.Body, bob.Body, again.Body, again.Headers)
	}
}

// TestALBKeySourceDown: a key source that fails is a 503 with
// Retry-After, the handler never runs, and the next request, with the
// keys back, goes through.
func TestALBKeySourceDown(t *testing.T) {
	down := true
	auth := testALBAuth()
	keys := auth.PublicKey
	auth.PublicKey = func(ctx context.Context, kid string) (*ecdsa.PublicKey, error) {
		if down {
			return nil, fmt.Errorf("dial tcp: i/o timeout")
		}
		return keys(ctx, kid)
	}
	e := newALBEnv(t, &dedupe.HTTPConfig{ALBAuth: auth})
	resp := e.send(t, albRequest(t, "k", userToken("alice")))
	if resp.StatusCode != 503 || resp.Headers["Retry-After"] != "1" || albProblem(resp) != dedupe.ProblemStoreUnavailable || e.runs != 0 {
		t.Errorf("got %d %v after %d runs, want 503 with Retry-After 1 and no run", resp.StatusCode, resp.Headers, e.runs)
	}
	down = false
	if resp := e.send(t, albRequest(t, "k", userToken("alice"))); resp.StatusCode != 201 || e.runs != 1 {
		t.Errorf("got %d after %d runs, want 201", resp.StatusCode, e.runs)
	}
}

// TestALBForgedClaimsWithoutAuth: without ALBAuth the oidc headers are
// anyone's to send, so they never scope a key: with SharedScope two
// "users" share one, and DefaultPrincipal finds no one.
func TestALBForgedClaimsWithoutAuth(t *testing.T) {
	e := newALBEnv(t, &dedupe.HTTPConfig{SharedScope: true})
	forge := func(sub string) events.ALBTargetGroupRequest {
		ev := albRequest(t, "k", userToken(sub))
		ev.Headers["x-amzn-oidc-identity"] = sub
		return ev
	}
	alice := e.send(t, forge("alice"))
	bob := e.send(t, forge("bob"))
	if e.runs != 1 || bob.Body != alice.Body {
		t.Errorf("runs %d, bob got %s, alice %s: forged claims scoped the key", e.runs, bob.Body, alice.Body)
	}
	ev := forge("alice")
	if p := dedupe.DefaultPrincipal(&ev); p != "" {
		t.Errorf("DefaultPrincipal = %q, want none", p)
	}
}

// TestALBScopedByTargetGroup: a key is scoped by the target group, and a
// guarded request without one is refused, never given an empty scope.
func TestALBScopedByTargetGroup(t *testing.T) {
	e := newALBEnv(t, &dedupe.HTTPConfig{ALBAuth: testALBAuth()})
	one := e.send(t, albRequest(t, "k", userToken("alice")))
	ev := albRequest(t, "k", userToken("alice"))
	ev.RequestContext.ELB.TargetGroupArn = strings.Replace(testTGArn, "payments", "refunds", 1)
	two := e.send(t, ev)
	if one.Body != `{"run":1}` || two.Body != `{"run":2}` {
		t.Errorf("got %s and %s, want two runs", one.Body, two.Body)
	}
	ev.RequestContext.ELB.TargetGroupArn = ""
	e.evs = nil
	resp := e.send(t, ev)
	if resp.StatusCode != 500 || e.runs != 2 || len(e.evs) != 1 || !errors.Is(e.evs[0].Err, dedupe.ErrNoEventSource) {
		t.Errorf("got %d after %d runs, events %+v; want 500, no run, ErrNoEventSource", resp.StatusCode, e.runs, e.evs)
	}
	ev.HTTPMethod = "GET" // unguarded: passes through
	if resp := e.send(t, ev); resp.StatusCode != 201 || e.runs != 3 {
		t.Errorf("GET without a target group: %d after %d runs, want it to pass", resp.StatusCode, e.runs)
	}
}

// TestALBQueryAsEncoded: query parameters enter the fingerprint as ALB
// passes them, URL-encoded as sent.
func TestALBQueryAsEncoded(t *testing.T) {
	e := newALBEnv(t, &dedupe.HTTPConfig{ALBAuth: testALBAuth()})
	e.send(t, albRequest(t, "k", userToken("alice")))
	ev := albRequest(t, "k", userToken("alice"))
	ev.QueryStringParameters["to"] = "acct=7"
	if resp := e.send(t, ev); resp.StatusCode != 422 {
		t.Errorf("decoded query: got %d, want 422", resp.StatusCode)
	}
	ev.QueryStringParameters["to"] = "acct%3D7"
	if resp := e.send(t, ev); resp.Headers[dedupe.HeaderReplayed] != "true" {
		t.Errorf("same query: got %d %v, want a replay", resp.StatusCode, resp.Headers)
	}
}

// TestALBBase64Junk: a body that claims base64 but is not is taken as
// sent: fingerprinted, replayed, never a panic.
func TestALBBase64Junk(t *testing.T) {
	e := newALBEnv(t, &dedupe.HTTPConfig{ALBAuth: testALBAuth()})
	ev := albRequest(t, "k", userToken("alice"))
	ev.Body, ev.IsBase64Encoded = "%%% not base64 ===", true
	first := e.send(t, ev)
	again := e.send(t, ev)
	ev.Body = "%%% not base64 ==="[1:]
	other := e.send(t, ev)
	if first.StatusCode != 201 || again.Headers[dedupe.HeaderReplayed] != "true" || other.StatusCode != 422 || e.runs != 1 {
		t.Errorf("got %d, %v, %d after %d runs; want 201, a replay, 422", first.StatusCode, again.Headers, other.StatusCode, e.runs)
	}
}

// TestALBReplayKeepsStatusDescription: the handler's own
// statusDescription is replayed, and the event names the route and
// status.
func TestALBReplayKeepsStatusDescription(t *testing.T) {
	e := newALBEnv(t, &dedupe.HTTPConfig{ALBAuth: testALBAuth()})
	e.send(t, albRequest(t, "k", userToken("alice")))
	resp := e.send(t, albRequest(t, "k", userToken("alice")))
	if resp.StatusDescription != "201 Created" || resp.Headers["Content-Type"] != "application/json" {
		t.Errorf("replay %+v", resp)
	}
	if ev := e.evs[len(e.evs)-1]; ev.Route != "POST "+dedupe.RouteNone || ev.Status != 201 || ev.Outcome != dedupe.OutcomeReplayed {
		t.Errorf("event %+v, want route %q, status 201, replayed", ev, "POST "+dedupe.RouteNone)
	}
}

// TestALBRefusedAtConstruction: every configuration that could never
// work panics where it is made, naming the option.
func TestALBRefusedAtConstruction(t *testing.T) {
	g := dedupe.New(memstore.New(), nil)
	alb := func(cfg *dedupe.HTTPConfig) func() {
		return func() {
			dedupe.ALB(g, cfg, func(context.Context, events.ALBTargetGroupRequest) (events.ALBTargetGroupResponse, error) {
				return events.ALBTargetGroupResponse{}, nil
			})
		}
	}
	arn := func(a string) *dedupe.HTTPConfig {
		return &dedupe.HTTPConfig{ALBAuth: &dedupe.ALBAuth{LoadBalancerARN: a}}
	}
	tests := []struct {
		name string
		f    func()
		want string
	}{
		{"no identity rule", alb(nil), "HTTPConfig.ALBAuth"},
		{"ALBAuth and Principal", alb(&dedupe.HTTPConfig{ALBAuth: testALBAuth(), Principal: func(any) string { return "x" }}), "not both"},
		{"empty ARN", alb(arn("")), "LoadBalancerARN is empty"},
		{"target group ARN", alb(arn(testTGArn)), "target group"},
		{"not an ELB ARN", alb(arn("arn:aws:lambda:us-east-2:123456789012:function:f")), "not an Elastic Load Balancing ARN"},
		{"Region that is a host", alb(arn("arn:aws:elasticloadbalancing:evil.example/x:123456789012:loadbalancer/app/a/b")), "malformed partition or Region"},
		{"partition without a key endpoint", alb(arn("arn:aws-cn:elasticloadbalancing:cn-north-1:123456789012:loadbalancer/app/a/b")), "set PublicKey"},
		{"ALBAuth on HTTPAPI", func() {
			dedupe.HTTPAPI(g, &dedupe.HTTPConfig{ALBAuth: testALBAuth()}, func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
				return events.APIGatewayV2HTTPResponse{}, nil
			})
		}, "ALBAuth is for the ALB adapter only"},
		{"ALBAuth on Middleware", func() {
			dedupe.Middleware(g, &dedupe.HTTPConfig{ALBAuth: testALBAuth(), SharedScope: true})
		}, "ALBAuth is for the ALB adapter only"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				msg := fmt.Sprint(recover())
				if !strings.Contains(msg, tc.want) {
					t.Errorf("panic %q, want it to say %q", msg, tc.want)
				}
			}()
			tc.f()
		})
	}
	// What works: each of the three identity rules, and the default key
	// endpoints of the aws and aws-us-gov partitions.
	for _, cfg := range []*dedupe.HTTPConfig{
		{ALBAuth: &dedupe.ALBAuth{LoadBalancerARN: testALBArn}},
		{ALBAuth: &dedupe.ALBAuth{LoadBalancerARN: "arn:aws-us-gov:elasticloadbalancing:us-gov-west-1:123456789012:loadbalancer/app/a/b"}},
		{Principal: func(any) string { return "x" }},
		{SharedScope: true},
	} {
		alb(cfg)()
	}
}

// TestALBKeyOfEvent: KeyOfEvent gives the key the ALB adapter claims, in
// both header modes and identity rules, also once the token has expired;
// it refuses a token another load balancer signed, and a request
// without a target group.
func TestALBKeyOfEvent(t *testing.T) {
	const prefix = "fn"
	for _, tc := range []struct {
		name, file string
		cfg        *dedupe.HTTPConfig
		token      string
	}{
		{"single-value, ALBAuth", "alb-target-group.json", &dedupe.HTTPConfig{ALBAuth: testALBAuth()}, userToken("alice")},
		{"multi-value, ALBAuth", "alb-target-group-multi.json", &dedupe.HTTPConfig{ALBAuth: testALBAuth()}, userToken("alice")},
		{"single-value, SharedScope", "alb-target-group.json", &dedupe.HTTPConfig{SharedScope: true}, ""},
		{"multi-value, SharedScope, forged claims", "alb-target-group-multi.json", &dedupe.HTTPConfig{SharedScope: true}, userToken("alice")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ev events.ALBTargetGroupRequest
			fixture(t, tc.file, &ev)
			if tc.token != "" {
				if ev.MultiValueHeaders != nil {
					ev.MultiValueHeaders["x-amzn-oidc-data"] = []string{tc.token}
				} else {
					ev.Headers["x-amzn-oidc-data"] = tc.token
				}
			}
			g := dedupe.New(memstore.New(), &dedupe.Config{Prefix: prefix, Now: newTestClock().Now})
			var claimed string
			h := dedupe.ALB(g, tc.cfg, func(ctx context.Context, _ events.ALBTargetGroupRequest) (events.ALBTargetGroupResponse, error) {
				c, _ := dedupe.ClaimFrom(ctx)
				claimed = c.Key
				return events.ALBTargetGroupResponse{StatusCode: 200}, nil
			})
			if resp, _ := h(context.Background(), ev); resp.StatusCode != 200 || claimed == "" {
				t.Fatalf("the adapter answered %d and claimed %q", resp.StatusCode, claimed)
			}
			got, err := dedupe.KeyOfEvent(tc.cfg, &ev)
			if err != nil {
				t.Fatalf("KeyOfEvent: %v", err)
			}
			if key := dedupe.StoreKey(prefix, got.Scoped); key != claimed {
				t.Errorf("KeyOfEvent gives %q, the adapter claimed %q", key, claimed)
			}
			if got.API != "alb:"+testTGArn || got.Route != "POST /payments" || (tc.cfg.SharedScope && got.Principal != "") {
				t.Errorf("KeyOfEvent = %+v", got)
			}
		})
	}
	var ev events.ALBTargetGroupRequest
	fixture(t, "alb-target-group.json", &ev)
	cfg := &dedupe.HTTPConfig{ALBAuth: testALBAuth()}
	h := albHeader()
	h["exp"] = 1
	ev.Headers["x-amzn-oidc-data"] = albToken(testALBKey(), h, map[string]any{"sub": "alice"})
	old, err := dedupe.KeyOfEvent(cfg, ev)
	ev.Headers["x-amzn-oidc-data"] = userToken("alice")
	fresh, _ := dedupe.KeyOfEvent(cfg, ev)
	if err != nil || old.Scoped != fresh.Scoped || old.Principal == "" {
		t.Errorf("an expired token's key: %+v, %v; want %+v", old, err, fresh)
	}
	h["signer"] = strings.Replace(testALBArn, "50dc", "ffff", 1)
	ev.Headers["x-amzn-oidc-data"] = albToken(testALBKey(), h, map[string]any{"sub": "alice"})
	if _, err := dedupe.KeyOfEvent(cfg, ev); err == nil {
		t.Error("KeyOfEvent took a token another load balancer signed")
	}
	ev.Headers["x-amzn-oidc-data"] = userToken("alice")
	ev.RequestContext.ELB.TargetGroupArn = ""
	if _, err := dedupe.KeyOfEvent(cfg, ev); !errors.Is(err, dedupe.ErrNoEventSource) {
		t.Errorf("no target group: %v, want ErrNoEventSource", err)
	}
}
