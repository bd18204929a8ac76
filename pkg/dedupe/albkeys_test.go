package dedupe

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestALBKeyCache runs the default key source against a local server
// standing in for ALB's key endpoint: keys are fetched by ID under the
// base URL, parsed, cached; a key the endpoint does not have is none, a
// failure is an error, and nothing but a P-256 PEM key is accepted.
func TestALBKeyCache(t *testing.T) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, _ := x509.MarshalPKIXPublicKey(&key.PublicKey)
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	der384, _ := x509.MarshalPKIXPublicKey(&p384.PublicKey)
	var fetches atomic.Int32
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetches.Add(1)
		paths = append(paths, r.URL.Path)
		switch r.URL.Path {
		case "/keys/good":
			pem.Encode(w, &pem.Block{Type: "PUBLIC KEY", Bytes: der})
		case "/keys/p384":
			pem.Encode(w, &pem.Block{Type: "PUBLIC KEY", Bytes: der384})
		case "/keys/junk":
			w.Write([]byte("<html>hello</html>"))
		case "/keys/down":
			w.WriteHeader(http.StatusInternalServerError)
		case "/keys/gone":
			w.WriteHeader(http.StatusForbidden) // S3 answers a missing object so
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	defer srv.Close()
	c := newALBKeyCache(srv.URL+"/keys/", srv.Client())
	ctx := context.Background()

	for range 3 {
		k, err := c.get(ctx, "good")
		if err != nil || k == nil || !k.Equal(&key.PublicKey) {
			t.Fatalf("get good = %v, %v; want the key", k, err)
		}
	}
	if n := fetches.Load(); n != 1 {
		t.Errorf("fetched %d times, want once (cached)", n)
	}
	for _, kid := range []string{"missing", "gone"} {
		if k, err := c.get(ctx, kid); k != nil || err != nil {
			t.Errorf("get %s = %v, %v; want no key, no error", kid, k, err)
		}
	}
	for _, kid := range []string{"down", "junk", "p384"} {
		if k, err := c.get(ctx, kid); k != nil || err == nil {
			t.Errorf("get %s = %v, %v; want an error", kid, k, err)
		}
	}
	before := fetches.Load()
	for _, kid := range []string{"../keys/good", "a/b", "a?b", "", "%2e"} {
		if k, err := c.get(ctx, kid); k != nil || err != nil {
			t.Errorf("get %q = %v, %v; want nothing", kid, k, err)
		}
	}
	if fetches.Load() != before {
		t.Errorf("a malformed kid was fetched: %v", paths)
	}
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := c.get(canceled, "other-kid"); err == nil || strings.Contains(err.Error(), "other-kid") {
		t.Errorf("a canceled fetch returned %v, want an error that does not quote the kid", err)
	}
}

// TestALBKeyCacheBounded: however many kids are asked for, the cache
// keeps at most albKeyCacheSize keys.
func TestALBKeyCacheBounded(t *testing.T) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, _ := x509.MarshalPKIXPublicKey(&key.PublicKey)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pem.Encode(w, &pem.Block{Type: "PUBLIC KEY", Bytes: der})
	}))
	defer srv.Close()
	c := newALBKeyCache(srv.URL+"/", srv.Client())
	for i := range 100 {
		if _, err := c.get(context.Background(), "k"+string(rune('a'+i%26))+string(rune('a'+i/26))); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(c.keys); n > albKeyCacheSize {
		t.Errorf("cache holds %d keys, want at most %d", n, albKeyCacheSize)
	}
}

// TestALBDefaultEndpoints: the default key source of each partition is
// the endpoint AWS documents, built from the load balancer's Region.
func TestALBDefaultEndpoints(t *testing.T) {
	for arn, want := range map[string]string{
		"arn:aws:elasticloadbalancing:eu-west-1:123456789012:loadbalancer/app/a/b":            "https://public-keys.auth.elb.eu-west-1.amazonaws.com/",
		"arn:aws-us-gov:elasticloadbalancing:us-gov-west-1:123456789012:loadbalancer/app/a/b": "https://s3-us-gov-west-1.amazonaws.com/aws-elb-public-keys-prod-us-gov-west-1/",
	} {
		partition, region, err := parseALBArn(arn)
		if err != nil {
			t.Fatal(err)
		}
		v, err := newALBVerifier(&ALBAuth{LoadBalancerARN: arn})
		if err != nil || v.keys == nil {
			t.Fatalf("%s: %v", arn, err)
		}
		if got := albKeyBase(partition, region); got != want {
			t.Errorf("%s: key endpoint %q, want %q", arn, got, want)
		}
	}
}

// FuzzALBVerifier: no token, however mangled, makes the verifier panic
// or yield a principal other than the one the load balancer signed for.
func FuzzALBVerifier(f *testing.F) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	const arn = "arn:aws:elasticloadbalancing:us-east-2:123456789012:loadbalancer/app/a/b"
	enc := base64.URLEncoding.EncodeToString
	input := enc([]byte(`{"alg":"ES256","kid":"k1","signer":"`+arn+`","iss":"https://idp","exp":4102444800}`)) + "." + enc([]byte(`{"sub":"alice"}`))
	sum := sha256.Sum256([]byte(input))
	r, s, _ := ecdsa.Sign(rand.Reader, key, sum[:])
	sig := make([]byte, 64)
	r.FillBytes(sig[:32])
	s.FillBytes(sig[32:])
	good := input + "." + enc(sig)
	f.Add(good, "")
	f.Add(good, "alice")
	f.Add(strings.ReplaceAll(good, "=", ""), "")
	f.Add("a.b.c", "x")
	v, err := newALBVerifier(&ALBAuth{LoadBalancerARN: arn, PublicKey: func(_ context.Context, kid string) (*ecdsa.PublicKey, error) {
		if kid == "k1" {
			return &key.PublicKey, nil
		}
		return nil, nil
	}})
	if err != nil {
		f.Fatal(err)
	}
	want := albPrincipal("https://idp", "alice")
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, token, identity string) {
		e := &albEvent{Headers: map[string]string{"x-amzn-oidc-data": token}}
		if identity != "" {
			e.Headers["x-amzn-oidc-identity"] = identity
		}
		p, no := v.principal(context.Background(), e, now)
		if no == nil && p != want {
			t.Fatalf("token %q gave principal %q", token, p)
		}
	})
}
