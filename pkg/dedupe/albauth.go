package dedupe

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ALBAuth tells the ALB adapter that the listener rule in front of the
// target group authenticates users (an authenticate-oidc or
// authenticate-cognito action): the caller is then the user the load
// balancer names in x-amzn-oidc-data, a JWT it signs with ES256.
//
// The adapter verifies that JWT on every guarded request before it takes
// an identity from it, as AWS recommends: the algorithm is ES256; the
// "signer" in its header is LoadBalancerARN; the "kid" is a key ID (1 to
// 64 letters, digits and '-', nothing that could change the key's URL);
// the signature verifies with that key's public key; "exp" (in the
// header, and in the claims when they have one) has not passed on the
// guard's clock; the claims have a "sub", and x-amzn-oidc-identity, when
// sent, equals it. The principal is the issuer ("iss" in the header)
// with "sub". Padding ('=') in the token's base64url parts, which ALB
// sends, is accepted.
//
// A request whose x-amzn-oidc-data fails any check, or that carries
// either header more than once, is refused with 401
// (ProblemIdentityUnverified) and never runs. One without
// x-amzn-oidc-data has no principal (a rule whose
// OnUnauthenticatedRequest is "allow" forwards anonymous users so): it
// is refused with 500 unless HTTPConfig.SharedScope is set. When the
// public key cannot be had (PublicKey fails), the request is refused
// with 503 and Retry-After (ProblemStoreUnavailable). Unguarded requests
// are never checked: authorizing requests stays the function's job.
type ALBAuth struct {
	// LoadBalancerARN is the ARN of the load balancer whose listener
	// authenticates, "arn:aws:elasticloadbalancing:<region>:<account>:
	// loadbalancer/app/<name>/<id>": tokens signed by any other are
	// refused. Required.
	LoadBalancerARN string

	// PublicKey returns the public key with ID kid, (nil, nil) when
	// there is none (the token is refused with 401), or an error when
	// the keys cannot be reached now (503). It is called only with a
	// kid that passed the checks above, and may be called concurrently.
	// Nil means ALB's regional endpoint of the load balancer's Region
	// (https://public-keys.auth.elb.<region>.amazonaws.com/<kid>; for
	// AWS GovCloud (US), the S3 endpoint AWS documents), fetched with a
	// 3 s timeout and cached, up to 16 keys, for the adapter's life;
	// for other partitions PublicKey is required.
	PublicKey func(ctx context.Context, kid string) (*ecdsa.PublicKey, error)
}

// Limits of the ALB identity check.
const (
	maxALBToken     = 16 << 10 // ALB refuses claims over 11 KiB
	maxALBKeyID     = 64
	albKeyTimeout   = 3 * time.Second
	albKeyCacheSize = 16
	maxALBKeyBytes  = 8 << 10
)

// refusal is how the identity rule of an adapter refuses a request
// before anything is claimed.
type refusal struct {
	outcome, problem string
	err              error
}

// Errors of the ALB identity check, for the log only: a client is told
// nothing more than ProblemIdentityUnverified.
var (
	errALBToken      = errors.New("dedupe: ALB x-amzn-oidc-data cannot be verified")
	errALBKeyMissing = errors.New("dedupe: ALB x-amzn-oidc-data names a key that does not exist")
)

// albVerifier checks ALB user claims for one ALBAuth.
type albVerifier struct {
	signer string
	keys   func(ctx context.Context, kid string) (*ecdsa.PublicKey, error)
}

// newALBVerifier validates auth and resolves its defaults.
func newALBVerifier(auth *ALBAuth) (*albVerifier, error) {
	partition, region, err := parseALBArn(auth.LoadBalancerARN)
	if err != nil {
		return nil, err
	}
	v := &albVerifier{signer: auth.LoadBalancerARN, keys: auth.PublicKey}
	if v.keys == nil {
		base := albKeyBase(partition, region)
		if base == "" {
			return nil, fmt.Errorf("dedupe: ALB: HTTPConfig.ALBAuth.PublicKey is nil and partition %q has no known key endpoint; set PublicKey", partition)
		}
		v.keys = newALBKeyCache(base, &http.Client{Timeout: albKeyTimeout}).get
	}
	return v, nil
}

// albKeyBase returns the URL ALB's public keys are found under, by key
// ID, in a partition and Region; "" for a partition AWS documents none
// for.
func albKeyBase(partition, region string) string {
	switch partition {
	case "aws":
		return "https://public-keys.auth.elb." + region + ".amazonaws.com/"
	case "aws-us-gov":
		return "https://s3-" + region + ".amazonaws.com/aws-elb-public-keys-prod-" + region + "/"
	}
	return ""
}

// parseALBArn checks that arn names an Application Load Balancer and
// returns its partition and Region.
func parseALBArn(arn string) (partition, region string, err error) {
	parts := strings.SplitN(arn, ":", 6)
	bad := func(why string) (string, string, error) {
		return "", "", fmt.Errorf("dedupe: ALB: HTTPConfig.ALBAuth.LoadBalancerARN %s; set it to the ARN of the load balancer, arn:aws:elasticloadbalancing:<region>:<account>:loadbalancer/app/<name>/<id>", why)
	}
	switch {
	case arn == "":
		return bad("is empty")
	case len(parts) != 6 || parts[0] != "arn" || parts[2] != "elasticloadbalancing":
		return bad("is not an Elastic Load Balancing ARN")
	case !strings.HasPrefix(parts[5], "loadbalancer/app/"):
		return bad("does not name an Application Load Balancer (a target group's ARN?)")
	case !isDNSLabel(parts[1]) || !isDNSLabel(parts[3]):
		return bad("has a malformed partition or Region")
	}
	return parts[1], parts[3], nil
}

// isDNSLabel reports whether s is lower-case letters, digits and '-',
// as partitions and Regions are: safe in a host name.
func isDNSLabel(s string) bool {
	if s == "" || len(s) > 63 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// isKeyID reports whether kid is safe to put in a URL path as it is:
// 1 to maxALBKeyID ASCII letters, digits and '-' (ALB's are UUIDs).
func isKeyID(kid string) bool {
	if kid == "" || len(kid) > maxALBKeyID {
		return false
	}
	for i := 0; i < len(kid); i++ {
		c := kid[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// albHeader is the JOSE header of ALB's user claims.
type albHeader struct {
	Alg, Kid, Signer, Iss string
	Exp                   json.Number
}

// principal verifies e's user claims at now and returns its caller.
func (v *albVerifier) principal(ctx context.Context, e *albEvent, now time.Time) (string, *refusal) {
	unverified := func(why string) (string, *refusal) {
		return "", &refusal{OutcomeInvalidRequest, ProblemIdentityUnverified, fmt.Errorf("%w: %s", errALBToken, why)}
	}
	data := e.headerValues("x-amzn-oidc-data")
	identity := e.headerValues("x-amzn-oidc-identity")
	switch {
	case len(data) > 1 || len(identity) > 1:
		return unverified("header repeated")
	case len(data) == 0 && len(identity) > 0:
		return unverified("x-amzn-oidc-identity without x-amzn-oidc-data")
	case len(data) == 0:
		return "", nil // no claims: an anonymous caller (SharedScope decides)
	}
	hdr, claims, err := v.parse(data[0], now)
	if err != nil {
		return unverified(err.Error())
	}
	key, err := v.keys(ctx, hdr.Kid)
	switch {
	case err != nil:
		return "", &refusal{OutcomeInvalidRequest, ProblemStoreUnavailable, fmt.Errorf("dedupe: ALB public key: %w", err)}
	case key == nil:
		return "", &refusal{OutcomeInvalidRequest, ProblemIdentityUnverified, errALBKeyMissing}
	}
	if !verifyES256(key, data[0]) {
		return unverified("bad signature")
	}
	sub, err := v.subject(claims, now)
	if err != nil {
		return unverified(err.Error())
	}
	if len(identity) == 1 && identity[0] != sub {
		return unverified("x-amzn-oidc-identity differs from the signed sub")
	}
	return albPrincipal(hdr.Iss, sub), nil
}

// unverifiedPrincipal is principal without the signature and expiry
// checks, for KeyOfEvent: the principal the adapter found, if the token
// was valid when it was sent. The signer must still be the configured
// load balancer.
func (v *albVerifier) unverifiedPrincipal(e *albEvent) (string, error) {
	data := e.headerValues("x-amzn-oidc-data")
	switch {
	case len(data) > 1:
		return "", fmt.Errorf("%w: header repeated", errALBToken)
	case len(data) == 0:
		return "", nil
	}
	// Expiry is not checked: pass the zero time.
	hdr, claims, err := v.parse(data[0], time.Time{})
	if err != nil {
		return "", fmt.Errorf("%w: %s", errALBToken, err)
	}
	sub, err := v.subject(claims, time.Time{})
	if err != nil {
		return "", fmt.Errorf("%w: %s", errALBToken, err)
	}
	return albPrincipal(hdr.Iss, sub), nil
}

// albPrincipal is the principal of a verified ALB user.
func albPrincipal(iss, sub string) string {
	return "alb:" + strconv.Itoa(len(iss)) + ":" + iss + sub
}

// parse checks what of a token can be checked without its key: its
// shape, algorithm, signer, key ID and expiry. It returns the header and
// the encoded claims.
func (v *albVerifier) parse(token string, now time.Time) (albHeader, string, error) {
	var hdr albHeader
	if len(token) > maxALBToken {
		return hdr, "", errors.New("token too long")
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return hdr, "", errors.New("not a JWS compact serialization")
	}
	m, err := decodeJOSE(parts[0])
	if err != nil {
		return hdr, "", fmt.Errorf("header: %w", err)
	}
	hdr = albHeader{Alg: str(m["alg"]), Kid: str(m["kid"]), Signer: str(m["signer"]), Iss: str(m["iss"]), Exp: number(m["exp"])}
	switch {
	case hdr.Alg != "ES256":
		return hdr, "", errors.New("alg is not ES256")
	case hdr.Signer != v.signer:
		return hdr, "", errors.New("signer is not HTTPConfig.ALBAuth.LoadBalancerARN")
	case !isKeyID(hdr.Kid):
		return hdr, "", errors.New("malformed kid")
	}
	if err := checkExp(hdr.Exp, now, true); err != nil {
		return hdr, "", err
	}
	return hdr, parts[1], nil
}

// subject decodes verified claims and returns their sub.
func (v *albVerifier) subject(claims string, now time.Time) (string, error) {
	c, err := decodeJOSE(claims)
	if err != nil {
		return "", fmt.Errorf("claims: %w", err)
	}
	if _, ok := c["exp"]; ok {
		if err := checkExp(number(c["exp"]), now, true); err != nil {
			return "", fmt.Errorf("claims: %w", err)
		}
	}
	sub := str(c["sub"])
	if sub == "" {
		return "", errors.New("claims have no sub")
	}
	return sub, nil
}

// checkExp checks an "exp" (seconds since the epoch) against now; a
// missing one is an error when required.
func checkExp(exp json.Number, now time.Time, required bool) error {
	if exp == "" {
		if required {
			return errors.New("no exp")
		}
		return nil
	}
	secs, err := exp.Float64()
	if err != nil || math.IsNaN(secs) || math.IsInf(secs, 0) {
		return errors.New("malformed exp")
	}
	if float64(now.Unix()) >= secs {
		return errors.New("expired")
	}
	return nil
}

// decodeJOSE decodes one base64url part of a token (padded or not) as a
// JSON object, numbers kept exact. Members are then read by their exact
// names: decoding into a struct would match "Sub" or "SIGNER" too
// (encoding/json folds case), and a claim a user may name must never
// stand in for "sub".
func decodeJOSE(part string) (map[string]any, error) {
	b, err := decodeB64URL(part)
	if err != nil {
		return nil, err
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil || m == nil {
		return nil, errors.New("not a JSON object")
	}
	if d.More() {
		return nil, errors.New("data after the JSON object")
	}
	return m, nil
}

// str returns v when it is a string, else "".
func str(v any) string {
	s, _ := v.(string)
	return s
}

// number returns v as a JSON number: a number, or a string of decimal
// digits; "" for anything else (strconv would take "NaN" or "Inf"), which
// checkExp refuses.
func number(v any) json.Number {
	switch x := v.(type) {
	case json.Number:
		return x
	case string:
		if x != "" && strings.Trim(x, "0123456789") == "" {
			return json.Number(x)
		}
	}
	return ""
}

// decodeB64URL decodes base64url with or without its padding, as ALB
// pads and RFC 7515 does not. Standard-alphabet characters are refused.
func decodeB64URL(s string) ([]byte, error) {
	b, err := base64.RawURLEncoding.Strict().DecodeString(strings.TrimRight(s, "="))
	if err != nil || len(s)-len(strings.TrimRight(s, "=")) > 2 {
		return nil, errors.New("not base64url")
	}
	return b, nil
}

// verifyES256 verifies token's ES256 signature (R || S, 64 bytes) with
// key, over the first two parts exactly as sent.
func verifyES256(key *ecdsa.PublicKey, token string) bool {
	dot := strings.LastIndexByte(token, '.')
	sig, err := decodeB64URL(token[dot+1:])
	if err != nil || len(sig) != 64 || key.Curve != elliptic.P256() {
		return false
	}
	sum := sha256.Sum256([]byte(token[:dot]))
	r, s := new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])
	return ecdsa.Verify(key, sum[:], r, s)
}

// albKeyCache fetches ALB's public keys by ID and keeps them.
type albKeyCache struct {
	base   string // URL prefix, ending in '/'
	client *http.Client
	mu     sync.Mutex
	keys   map[string]*ecdsa.PublicKey
}

func newALBKeyCache(base string, client *http.Client) *albKeyCache {
	return &albKeyCache{base: base, client: client, keys: make(map[string]*ecdsa.PublicKey)}
}

// get returns the key kid, from the cache or the endpoint. A key the
// endpoint does not have (403, 404) is (nil, nil), and not cached, so a
// forged kid can never push out a real key for long.
func (c *albKeyCache) get(ctx context.Context, kid string) (*ecdsa.PublicKey, error) {
	if !isKeyID(kid) { // checked before; the URL depends on it
		return nil, nil
	}
	c.mu.Lock()
	k, ok := c.keys[kid]
	c.mu.Unlock()
	if ok {
		return k, nil
	}
	ctx, cancel := context.WithTimeout(ctx, albKeyTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+kid, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.client.Do(req)
	if err != nil {
		// Not the *url.Error itself: its URL holds the kid, a value of
		// the request, which the log never quotes.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("fetch key: %w", err)
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound, http.StatusForbidden:
		return nil, nil
	default:
		return nil, fmt.Errorf("key endpoint answered %d", resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxALBKeyBytes))
	if err != nil {
		return nil, err
	}
	k, err = parseALBKey(body)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if len(c.keys) >= albKeyCacheSize {
		for old := range c.keys {
			delete(c.keys, old)
			break
		}
	}
	c.keys[kid] = k
	c.mu.Unlock()
	return k, nil
}

// parseALBKey parses a PEM public key of ALB's: ECDSA on P-256.
func parseALBKey(b []byte) (*ecdsa.PublicKey, error) {
	block, _ := pem.Decode(b)
	if block == nil || block.Type != "PUBLIC KEY" {
		return nil, errors.New("key endpoint sent no PEM public key")
	}
	pub, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parse public key: %w", err)
	}
	k, ok := pub.(*ecdsa.PublicKey)
	if !ok || k.Curve != elliptic.P256() {
		return nil, errors.New("key endpoint sent a key that is not ECDSA P-256")
	}
	return k, nil
}
