package dedupe

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The ALB identity check's invariants that need its parts: the key ID
// and ARN alphabets, the token bound and the key cache's capacity.

const invariantALBArn = "arn:aws:elasticloadbalancing:us-east-2:123456789012:loadbalancer/app/a/b"

// invariantALBKey is the load balancer's signing key in these tests.
var invariantALBKey, _ = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)

// signALB signs a header and claims, given as JSON text, as ALB does
// (ES256), each part encoded with enc.
func signALB(t testing.TB, enc *base64.Encoding, header, claims string) string {
	t.Helper()
	signed := enc.EncodeToString([]byte(header)) + "." + enc.EncodeToString([]byte(claims))
	sum := sha256.Sum256([]byte(signed))
	r, s, err := ecdsa.Sign(rand.Reader, invariantALBKey, sum[:])
	if err != nil {
		t.Fatal(err)
	}
	sig := make([]byte, 64)
	r.FillBytes(sig[:32])
	s.FillBytes(sig[32:])
	return signed + "." + enc.EncodeToString(sig)
}

// albHeaderJSON is ALB's JOSE header with key ID kid.
func albHeaderJSON(kid string) string {
	k, _ := json.Marshal(kid)
	return fmt.Sprintf(`{"typ":"JWT","alg":"ES256","kid":%s,"signer":%q,"iss":"https://idp","exp":4102444800}`, k, invariantALBArn)
}

// invariantVerifier is the verifier of invariantALBArn whose key source
// has the test key under every ID, and counts how often it is asked.
func invariantVerifier(t testing.TB, asked *atomic.Int32) *albVerifier {
	t.Helper()
	v, err := newALBVerifier(&ALBAuth{LoadBalancerARN: invariantALBArn, PublicKey: func(context.Context, string) (*ecdsa.PublicKey, error) {
		asked.Add(1)
		return &invariantALBKey.PublicKey, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

var invariantNow = time.Date(2031, 3, 4, 5, 6, 7, 0, time.UTC)

// TestALBKeyIDIsItsDocumentedForm states ALBAuth's key ID rule: a kid is
// 1 to maxALBKeyID ASCII letters (either case), digits and '-'. Every
// such kid reaches the key source and its token verifies; any other byte,
// and one byte more, refuses the token before the key source is asked
// (the default source puts the kid in a URL). Each byte is tried alone
// and inside a longer kid.
func TestALBKeyIDIsItsDocumentedForm(t *testing.T) {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-"
	var asked atomic.Int32
	v := invariantVerifier(t, &asked)
	try := func(kid string, want bool) {
		t.Helper()
		asked.Store(0)
		e := &albEvent{Headers: map[string]string{"x-amzn-oidc-data": signALB(t, base64.URLEncoding, albHeaderJSON(kid), `{"sub":"alice"}`)}}
		p, no := v.principal(context.Background(), e, invariantNow)
		if got := no == nil; got != want || (want && p != albPrincipal("https://idp", "alice")) {
			t.Errorf("kid %q: principal %q, refusal %v; want accepted %v", kid, p, no, want)
		}
		if n := asked.Load(); (n == 1) != want {
			t.Errorf("kid %q: the key source was asked %d times, want accepted %v", kid, n, want)
		}
		if isKeyID(kid) != want {
			t.Errorf("isKeyID(%q) = %v, want %v", kid, !want, want)
		}
	}
	for b := range 256 {
		c := string(rune(b)) // from 0x80, two bytes of UTF-8, as JSON can carry
		ok := strings.IndexByte(alphabet, byte(b)) >= 0
		try(c, ok)
		try("k-"+c+"-9", ok)
	}
	try(strings.Repeat(alphabet, 2)[:maxALBKeyID], true)
	try(strings.Repeat("Z", maxALBKeyID), true)
	try(strings.Repeat("z", maxALBKeyID+1), false)
	try("", false)
}

// TestALBArnLabelsAreHostLabels states LoadBalancerARN's rule for the
// partition and Region, which the default key source puts in a host
// name: each is 1 to 63 lower-case letters, digits and '-' (a DNS
// label). With a key source of its own, an ALBAuth with any such
// partition and Region is accepted; any other byte, an empty label, or
// one of 64 bytes is refused.
func TestALBArnLabelsAreHostLabels(t *testing.T) {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789-"
	keys := func(context.Context, string) (*ecdsa.PublicKey, error) { return nil, nil }
	arn := func(partition, region string) string {
		return "arn:" + partition + ":elasticloadbalancing:" + region + ":123456789012:loadbalancer/app/a/b"
	}
	try := func(partition, region string, want bool) {
		t.Helper()
		_, err := newALBVerifier(&ALBAuth{LoadBalancerARN: arn(partition, region), PublicKey: keys})
		if got := err == nil; got != want {
			t.Errorf("partition %q, Region %q: error %v, want accepted %v", partition, region, err, want)
		}
	}
	for b := range 256 {
		c := string([]byte{byte(b)})
		ok := strings.IndexByte(alphabet, byte(b)) >= 0
		try("aws", c, ok)
		try("aws", "eu-"+c+"-1", ok)
		try(c, "eu-west-1", ok)
		try("p"+c+"p", "eu-west-1", ok)
	}
	label := strings.Repeat("a", 60) + "z09" // 63 bytes
	try(label, label, true)
	try("aws", label+"a", false)
	try(label+"a", "eu-west-1", false)
	try("", "eu-west-1", false)
	try("aws", "", false)
}

// TestALBTokenBound states the bound of the identity check: a token of
// up to maxALBToken bytes is verified like any other (ALB's own, for
// claims of up to 11 KiB, are shorter), and a longer one is refused
// before its key is asked for.
func TestALBTokenBound(t *testing.T) {
	var asked atomic.Int32
	v := invariantVerifier(t, &asked)
	// tokenOf returns a valid token of exactly n bytes, padding a claim
	// and, to reach every length, the header's typ. Its parts are
	// unpadded base64url; the signature's is 86 bytes.
	tokenOf := func(n int) string {
		enc := base64.RawURLEncoding
		for typ := range 4 {
			header := strings.Replace(albHeaderJSON("k1"), `"JWT"`, `"JWT`+strings.Repeat(" ", typ)+`"`, 1)
			rest := n - enc.EncodedLen(len(header)) - 1 - 1 - enc.EncodedLen(64) // the claims' part
			for pad := max(rest*3/4-32, 0); ; pad++ {
				claims := `{"sub":"alice","pad":"` + strings.Repeat("x", pad) + `"}`
				size := n - rest + enc.EncodedLen(len(claims))
				if size == n {
					return signALB(t, enc, header, claims)
				}
				if size > n {
					break
				}
			}
		}
		t.Fatalf("no token of %d bytes", n)
		return ""
	}
	for _, tc := range []struct {
		n    int
		want bool
	}{{maxALBToken - 1, true}, {maxALBToken, true}, {maxALBToken + 1, false}} {
		asked.Store(0)
		e := &albEvent{Headers: map[string]string{"x-amzn-oidc-data": tokenOf(tc.n)}}
		p, no := v.principal(context.Background(), e, invariantNow)
		if got := no == nil; got != tc.want || (tc.want && p != albPrincipal("https://idp", "alice")) {
			t.Errorf("token of %d bytes: principal %q, refusal %v; want accepted %v", tc.n, p, no, tc.want)
		}
		if !tc.want && asked.Load() != 0 {
			t.Errorf("token of %d bytes: the key source was asked", tc.n)
		}
	}
}

// TestALBKeyCacheKeepsItsCapacity states the default key source's
// capacity: once fetched, each of up to albKeyCacheSize keys is served
// from the cache, however the requests for them interleave; only a key
// beyond that many may push another out.
func TestALBKeyCacheKeepsItsCapacity(t *testing.T) {
	der, _ := x509.MarshalPKIXPublicKey(&invariantALBKey.PublicKey)
	var fetches atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fetches.Add(1)
		pem.Encode(w, &pem.Block{Type: "PUBLIC KEY", Bytes: der})
	}))
	defer srv.Close()
	c := newALBKeyCache(srv.URL+"/", srv.Client())
	for round := range 3 {
		for i := range albKeyCacheSize {
			k, err := c.get(context.Background(), fmt.Sprintf("kid-%d", i))
			if err != nil || k == nil {
				t.Fatalf("round %d, kid-%d: %v, %v", round, i, k, err)
			}
		}
	}
	if n := fetches.Load(); n != albKeyCacheSize {
		t.Errorf("%d keys asked for 3 times each: fetched %d times, want %d (once each)", albKeyCacheSize, n, albKeyCacheSize)
	}
}
