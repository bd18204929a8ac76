package e2e

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambda-dedupe/dedupe/infra"
	"github.com/lambda-dedupe/dedupe/localtest/dynalite"
	"github.com/lambda-dedupe/dedupe/localtest/gateway"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
)

// TestALBTarget runs examples/alb-payments, built as it deploys, under
// the emulator with ALB target group events (multi-value headers, as its
// template configures), against dynalite. The user claims are signed
// with a key of the test's; the function fetches it with its default key
// source from ALB's regional endpoint, which a local proxy answers (the
// function sees HTTPS_PROXY and a CA bundle of the test's, SSL_CERT_FILE):
// the fetch, its TLS, the cache and the 404 and 500 answers are all the
// real code's.
func TestALBTarget(t *testing.T) {
	needStack(t)
	const (
		region = "us-east-2"
		lb     = "arn:aws:elasticloadbalancing:us-east-2:123456789012:loadbalancer/app/alb-payments/50dc6c495c0c9188"
		kid    = "7d1b0c3e-5f4a-4b2e-9c8d-0a1b2c3d4e5f"
	)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	endpoint := newKeyEndpoint(t, "public-keys.auth.elb."+region+".amazonaws.com", map[string]*ecdsa.PublicKey{kid: &key.PublicKey})

	root, err := infra.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	bootstrap := filepath.Join(t.TempDir(), "alb-payments", "bootstrap")
	if err := gateway.BuildBootstrap(t.Context(), root, "./examples/alb-payments", bootstrap); err != nil {
		t.Fatal(err)
	}
	pool, err := gateway.NewPool(gateway.PoolConfig{
		RIE: riePath,
		Function: gateway.Function{Name: "AlbPaymentsFunction", Bootstrap: bootstrap, Timeout: 10 * time.Second, Env: map[string]string{
			"IDEMPOTENCY_TABLE":  tableName("IdempotencyTable"),
			"LOAD_BALANCER_ARN":  lb,
			dynalite.EnvEndpoint: db.Endpoint(),
			"AWS_REGION":         region,
			"HTTPS_PROXY":        endpoint.proxyURL,
			"SSL_CERT_FILE":      endpoint.caFile,
		}},
		MaxConcurrency: 1, // one warm environment: its key cache is seen
		Output:         output,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()

	token := func(signWith *ecdsa.PrivateKey, kid, sub string) string {
		enc := func(v any) string { b, _ := json.Marshal(v); return base64.URLEncoding.EncodeToString(b) }
		input := enc(map[string]any{"typ": "JWT", "alg": "ES256", "kid": kid, "signer": lb, "iss": "https://cognito-idp.us-east-2.amazonaws.com/us-east-2_e2e",
			"client": "e2e", "exp": time.Now().Add(5 * time.Minute).Unix()}) + "." + enc(map[string]any{"sub": sub, "email": sub + "@example.com"})
		sum := sha256.Sum256([]byte(input))
		r, s, err := ecdsa.Sign(rand.Reader, signWith, sum[:])
		if err != nil {
			t.Fatal(err)
		}
		sig := make([]byte, 64)
		r.FillBytes(sig[:32])
		s.FillBytes(sig[32:])
		return input + "." + base64.URLEncoding.EncodeToString(sig)
	}
	fixture, err := os.ReadFile(filepath.Join(root, "examples", "alb-payments", "testdata", "alb-post.json"))
	if err != nil {
		t.Fatal(err)
	}
	clientKey := "e2e-" + rand.Text()
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	alice, bob := token(key, kid, "alice"), token(key, kid, "bob")
	tests := []struct {
		name       string
		edit       func(*events.ALBTargetGroupRequest)
		status     int
		body       string // "" when not checked
		replayed   bool
		retryAfter string
	}{
		{name: "first payment", edit: as(alice, clientKey), status: 201, body: `{"payment":"pay-1"}`},
		{name: "the retry replays", edit: as(alice, clientKey), status: 201, body: `{"payment":"pay-1"}`, replayed: true},
		{name: "another user's same key runs", edit: as(bob, clientKey), status: 201, body: `{"payment":"pay-2"}`},
		{name: "claims signed by another key", edit: as(token(other, kid, "alice"), clientKey), status: 401},
		{name: "a kid the endpoint does not have", edit: as(token(key, "0c0c0c0c-0000-4000-8000-000000000000", "alice"), clientKey), status: 401},
		{name: "the key endpoint failing", edit: as(token(key, "down", "alice"), clientKey), status: 503, retryAfter: "1"},
		{name: "two keys", edit: as(alice, clientKey, "other"), status: 400},
		{name: "no target group", edit: func(r *events.ALBTargetGroupRequest) {
			as(alice, clientKey)(r)
			r.RequestContext.ELB.TargetGroupArn = ""
		}, status: 500},
		{name: "GET passes through", edit: func(r *events.ALBTargetGroupRequest) { r.HTTPMethod, r.Path = "GET", "/health" }, status: 200, body: `{"ok":true}`},
		{name: "the retry still replays", edit: as(alice, clientKey), status: 201, body: `{"payment":"pay-1"}`, replayed: true},
	}
	for _, tc := range tests {
		var req events.ALBTargetGroupRequest
		if err := json.Unmarshal(fixture, &req); err != nil {
			t.Fatal(err)
		}
		tc.edit(&req)
		payload, _ := json.Marshal(req)
		out, err := pool.Invoke(t.Context(), payload)
		if err != nil {
			t.Fatalf("%s: invoke: %v", tc.name, err)
		}
		var resp events.ALBTargetGroupResponse
		if err := json.Unmarshal(out, &resp); err != nil {
			t.Fatalf("%s: %v: %s", tc.name, err, out)
		}
		h := resp.MultiValueHeaders
		t.Logf("%s: %s", tc.name, out)
		replayed := len(h[dedupe.HeaderReplayed]) == 1 && h[dedupe.HeaderReplayed][0] == "true"
		if resp.StatusCode != tc.status || (tc.body != "" && resp.Body != tc.body) || replayed != tc.replayed ||
			strings.Join(h["Retry-After"], ",") != tc.retryAfter || len(resp.Headers) > 0 || !strings.HasPrefix(resp.StatusDescription, strconv.Itoa(resp.StatusCode)+" ") {
			t.Errorf("%s: got %s, want %d %s (replayed %v, Retry-After %q), multi-value headers only", tc.name, out, tc.status, tc.body, tc.replayed, tc.retryAfter)
		}
	}
	if got := endpoint.fetches(kid); got != 1 {
		t.Errorf("the function fetched key %s %d times, want once (cached in its warm environment)", kid, got)
	}
	if s := pool.Stats(); s.Started != 1 {
		t.Errorf("%d environments started, want 1", s.Started)
	}
	if bad := endpoint.fetches("../"); bad != 0 {
		t.Errorf("a path outside the keys was fetched")
	}
}

// as sets the request's user claims and Idempotency-Key values.
func as(token string, keys ...string) func(*events.ALBTargetGroupRequest) {
	return func(r *events.ALBTargetGroupRequest) {
		r.MultiValueHeaders["x-amzn-oidc-data"] = []string{token}
		r.MultiValueHeaders["idempotency-key"] = keys
	}
}

// keyEndpoint stands in for ALB's public key endpoint: an HTTPS proxy
// that answers CONNECT to host itself, with a certificate of a CA it
// writes to caFile, serving each key as PEM at /<kid>, 500 at /down and
// 404 elsewhere.
type keyEndpoint struct {
	proxyURL, caFile string
	mu               sync.Mutex
	paths            []string
}

func newKeyEndpoint(t *testing.T, host string, keys map[string]*ecdsa.PublicKey) *keyEndpoint {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "e2e key endpoint CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	leafKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: host}, DNSNames: []string{host},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage: x509.KeyUsageDigitalSignature}
	caCert, _ := x509.ParseCertificate(caDER)
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &leafKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	e := &keyEndpoint{caFile: filepath.Join(t.TempDir(), "ca.pem")}
	if err := os.WriteFile(e.caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	tlsCfg := &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{leafDER}, PrivateKey: leafKey}}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e.proxyURL = "http://" + ln.Addr().String()
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	serve := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.mu.Lock()
		e.paths = append(e.paths, r.URL.Path)
		e.mu.Unlock()
		kid := strings.TrimPrefix(r.URL.Path, "/")
		if kid == "down" {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		k, ok := keys[kid]
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		der, _ := x509.MarshalPKIXPublicKey(k)
		pem.Encode(w, &pem.Block{Type: "PUBLIC KEY", Bytes: der})
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer conn.Close()
				conn.SetDeadline(time.Now().Add(30 * time.Second))
				req, err := http.ReadRequest(bufio.NewReader(conn))
				if err != nil || req.Method != http.MethodConnect || req.Host != host+":443" {
					conn.Write([]byte("HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n"))
					return
				}
				conn.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n"))
				tc := tls.Server(conn, tlsCfg)
				br := bufio.NewReader(tc)
				for {
					r, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					rec := &bufferedResponse{header: http.Header{}}
					serve(rec, r)
					rec.writeTo(tc)
				}
			}()
		}
	}()
	return e
}

// fetches counts the requests for /<kid>, or for paths containing kid
// when it is not a key ID.
func (e *keyEndpoint) fetches(kid string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, p := range e.paths {
		if p == "/"+kid || strings.Contains(p, kid) && strings.Contains(kid, "/") {
			n++
		}
	}
	return n
}

// bufferedResponse is a minimal http.ResponseWriter written out as one
// HTTP/1.1 response.
type bufferedResponse struct {
	header http.Header
	status int
	body   strings.Builder
}

func (b *bufferedResponse) Header() http.Header { return b.header }

func (b *bufferedResponse) Write(p []byte) (int, error) { return b.body.Write(p) }

func (b *bufferedResponse) WriteHeader(status int) { b.status = status }

func (b *bufferedResponse) writeTo(w io.Writer) {
	status := b.status
	if status == 0 {
		status = http.StatusOK
	}
	resp := &http.Response{StatusCode: status, ProtoMajor: 1, ProtoMinor: 1, Header: b.header,
		ContentLength: int64(b.body.Len()), Body: io.NopCloser(strings.NewReader(b.body.String()))}
	resp.Write(w)
}
