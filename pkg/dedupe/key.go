package dedupe

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Names on the wire: the headers of the HTTP adapters, and the message
// attribute of SQS.
const (
	// HeaderIdempotencyKey is the request header carrying the client's
	// idempotency key (draft-ietf-httpapi-idempotency-key-header).
	HeaderIdempotencyKey = "Idempotency-Key"

	// HeaderReplayed is set to "true" on every replayed response, as
	// Stripe does, so a client can tell a replay from a first answer.
	HeaderReplayed = "Idempotent-Replayed"

	// SQSKeyAttribute is the message attribute SQS reads the
	// idempotency key from by default.
	SQSKeyAttribute = "Idempotency-Key"
)

// ParseKey parses the value of an Idempotency-Key header and returns the
// key it carries.
//
// A value starting with a double quote is a Structured Field string
// (RFC 9651), as the IETF draft specifies: `"abc"`, with `\"` and `\\` as
// the only escapes, and nothing after the closing quote: Structured Field
// parameters (`"abc";v=1`) are refused, not ignored, so two requests that
// differ only in a parameter can never be taken for the same key. Any
// other value is a bare key, taken as is, except that it may not contain
// a comma: API Gateway payload 2.0 and Function URLs join a repeated
// header's values with commas, so `a,b` is two keys, which is refused;
// quote a key that holds a comma. Leading and trailing spaces and tabs
// are ignored in both forms, so `"abc"` and `abc` give the same key.
//
// The key must be 1 to MaxKeyLength printable ASCII characters (0x20 to
// 0x7E). Anything else, an empty value included, returns an error
// wrapping ErrInvalidKey. The error never quotes the value.
func ParseKey(value string) (string, error) {
	v := strings.Trim(value, " \t")
	if v == "" {
		return "", fmt.Errorf("parse idempotency key: empty: %w", ErrInvalidKey)
	}
	if v[0] != '"' {
		if strings.IndexByte(v, ',') >= 0 {
			return "", fmt.Errorf("parse idempotency key: a comma in a bare key (a repeated header?): %w", ErrInvalidKey)
		}
		if err := checkKeyChars(v); err != nil {
			return "", err
		}
		return v, nil
	}
	return parseSFString(v)
}

// parseSFString parses v, which starts with a double quote, as a
// Structured Field string that must make up the whole value.
func parseSFString(v string) (string, error) {
	// Fast path: no escapes, so the key is a substring of v.
	if end := strings.IndexByte(v[1:], '"') + 1; end > 0 && strings.IndexByte(v[1:end], '\\') < 0 {
		if end != len(v)-1 {
			return "", fmt.Errorf("parse idempotency key: characters after the closing quote: %w", ErrInvalidKey)
		}
		key := v[1:end]
		if err := checkKeyChars(key); err != nil {
			return "", err
		}
		return key, nil
	}
	var b strings.Builder
	for i := 1; i < len(v); i++ {
		c := v[i]
		switch {
		case c == '\\':
			i++
			if i == len(v) || (v[i] != '"' && v[i] != '\\') {
				return "", fmt.Errorf("parse idempotency key: bad escape in quoted string: %w", ErrInvalidKey)
			}
			b.WriteByte(v[i])
		case c == '"':
			if i != len(v)-1 {
				return "", fmt.Errorf("parse idempotency key: characters after the closing quote: %w", ErrInvalidKey)
			}
			key := b.String()
			if err := checkKeyChars(key); err != nil {
				return "", err
			}
			return key, nil
		case c < 0x20 || c > 0x7e:
			return "", fmt.Errorf("parse idempotency key: not printable ASCII: %w", ErrInvalidKey)
		default:
			b.WriteByte(c)
		}
	}
	return "", fmt.Errorf("parse idempotency key: unterminated quoted string: %w", ErrInvalidKey)
}

// checkKeyChars reports whether key has an acceptable length and only
// printable ASCII characters.
func checkKeyChars(key string) error {
	if len(key) == 0 {
		return fmt.Errorf("parse idempotency key: empty: %w", ErrInvalidKey)
	}
	if len(key) > MaxKeyLength {
		return fmt.Errorf("parse idempotency key: longer than %d characters: %w", MaxKeyLength, ErrInvalidKey)
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c < 0x20 || c > 0x7e {
			return fmt.Errorf("parse idempotency key: not printable ASCII: %w", ErrInvalidKey)
		}
	}
	return nil
}

// scopeKey returns the key the Guard sees for a client key used by
// principal on route of the deployment api:
//
//	<api>|<route>|<principal>|<key>
//	e.g. http:a1b2c3/prod|POST /payments|3b0c…e1|order-42
//
// api, route and key are escaped ('%' as %25, '|' as %7C), so '|' appears
// only as the separator; principal is "-" when empty (HTTPConfig.
// SharedScope), otherwise the first 16 bytes of its SHA-256 in hex, so no
// principal can contain '|' either and none is stored in clear. The
// encoding is therefore injective: two different (api, route, principal,
// key) tuples never share a scope, whatever characters a client puts in
// its key or path. Guard.Key bounds the result's length.
func scopeKey(api, route, principal, key string) string {
	var b strings.Builder
	b.Grow(len(api) + len(route) + len(key) + 36)
	writeEscaped(&b, api)
	b.WriteByte('|')
	writeEscaped(&b, route)
	b.WriteByte('|')
	if principal == "" {
		b.WriteByte('-')
	} else {
		// Principals are short: hash through a stack buffer.
		var buf [128]byte
		var sum [sha256.Size]byte
		if len(principal) <= len(buf) {
			sum = sha256.Sum256(buf[:copy(buf[:], principal)])
		} else {
			sum = sha256.Sum256([]byte(principal))
		}
		var h [32]byte
		hex.Encode(h[:], sum[:16])
		b.Write(h[:])
	}
	b.WriteByte('|')
	writeEscaped(&b, key)
	return b.String()
}

// writeEscaped writes s to b with '%' and '|' percent-encoded.
func writeEscaped(b *strings.Builder, s string) {
	for {
		i := strings.IndexAny(s, "%|")
		if i < 0 {
			b.WriteString(s)
			return
		}
		b.WriteString(s[:i])
		if s[i] == '%' {
			b.WriteString("%25")
		} else {
			b.WriteString("%7C")
		}
		s = s[i+1:]
	}
}

// KeyRef returns a short, stable reference to key for logs and errors:
// "key:" and the first 12 hex digits of its SHA-256. Keys can carry
// personal data (an e-mail address, an order number), so nothing in this
// module quotes a whole key; KeyRef lets an operator match log lines to a
// record (compute it from the stored key) without exposing it. It is 48
// bits, a locator rather than an identity: distinct keys can share one,
// by chance or planted, so Admin.FindRef returns every record with it and
// the operator's tools act on one only when it is the only one.
func KeyRef(key string) string {
	// Most keys are short: hash through a stack buffer, and build the
	// reference in place, so that it costs one allocation.
	var buf [256]byte
	var sum [sha256.Size]byte
	if len(key) <= len(buf) {
		sum = sha256.Sum256(buf[:copy(buf[:], key)])
	} else {
		sum = sha256.Sum256([]byte(key))
	}
	ref := [len("key:") + 12]byte{'k', 'e', 'y', ':'}
	hex.Encode(ref[len("key:"):], sum[:6])
	return string(ref[:])
}

// maxReadableKey is the longest stored key kept as it is; longer ones are
// shortened by boundKey. Hashed keys are always longer than this, so the
// two forms can never collide.
const maxReadableKey = 1024

// hashedKeyPrefix is how much of a long key a shortened key keeps in clear.
const hashedKeyPrefix = 960

// boundKey returns key unchanged when it has at most maxReadableKey bytes,
// and otherwise its first bytes (up to hashedKeyPrefix, cut at a UTF-8
// boundary, which valid UTF-8 has within 3 bytes; a key that is not UTF-8
// is cut no further back) followed by "#sha256:" and the hex SHA-256 of
// the whole key. The result is a valid store key whenever key is valid
// UTF-8, and the mapping is injective, for any bytes: a short key maps to
// itself, a long one to a form longer than maxReadableKey that only it
// produces.
//
//	len(key) <= 1024   key
//	len(key)  > 1024   key[:<=960] + "#sha256:" + hex(sha256(key))   (1029..1032 bytes)
func boundKey(key string) string {
	if len(key) <= maxReadableKey {
		return key
	}
	cut := hashedKeyPrefix
	for cut > hashedKeyPrefix-(utf8.UTFMax-1) && !utf8.RuneStart(key[cut]) {
		cut--
	}
	sum := sha256.Sum256([]byte(key))
	return key[:cut] + "#sha256:" + hex.EncodeToString(sum[:])
}
