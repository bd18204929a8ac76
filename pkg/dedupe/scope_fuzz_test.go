package dedupe

import (
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"
)

// unscope splits a scopeKey result back into its parts: api, route, the
// principal field ("-" or 32 hex digits) and key. It fails when s is not
// four '|'-separated, percent-escaped fields. That such a left inverse
// exists is what makes scopeKey injective (up to a collision of the
// principal's truncated SHA-256).
func unscope(t *testing.T, s string) (api, route, principal, key string) {
	t.Helper()
	parts := strings.Split(s, "|")
	if len(parts) != 4 {
		t.Fatalf("scopeKey result %q has %d fields, want 4", s, len(parts))
	}
	unescape := func(p string) string {
		// Only %25 and %7C are ever written; PathUnescape undoes exactly
		// those, and a '%' that is not one of them cannot occur.
		v, err := url.PathUnescape(p)
		if err != nil {
			t.Fatalf("scopeKey field %q does not unescape: %v", p, err)
		}
		return v
	}
	return unescape(parts[0]), unescape(parts[1]), parts[2], unescape(parts[3])
}

// FuzzScopeKey checks that the stored key is injective over (api, route,
// principal, key) and always a valid store key:
//
//   - scopeKey has a left inverse (unscope), and two tuples with equal
//     scopes are equal;
//   - Guard.Key (prefix and boundKey) is injective over scopes, at most
//     MaxStoreKeyBytes long and valid UTF-8 whenever its input is.
//
// rep repeats the key so that the fuzzer reaches boundKey's long forms.
func FuzzScopeKey(f *testing.F) {
	f.Add("http:a1/prod", "POST /payments", "jwt:alice", "order-42", "http:a1/prod", "POST /payments", "jwt:bob", "order-42", uint16(0))
	f.Add("", "POST /a", "p", "b|c", "", "POST /a|b", "p", "c", uint16(0))
	f.Add("", "POST /a", "", "c", "", "POST /a", "-", "c", uint16(0))
	f.Add("rest:x/dev", "POST /a%7Cb", "", "c", "rest:x/dev", "POST /a|b", "", "c", uint16(3))
	f.Add("url:d.on.aws", "POST /é", "iam:arn", "ключ", "url:d.on.aws", "POST /é", "iam:arn", "ключ", uint16(700))
	f.Add("http:a/b", "POST /x", "p", "%", "http:a/b", "POST /x", "p", "%25", uint16(2047))
	f.Fuzz(func(t *testing.T, api1, route1, p1, key1, api2, route2, p2, key2 string, rep uint16) {
		if n := int(rep) % 2100; n > 1 && len(key1)*n <= 8192 {
			key1 = strings.Repeat(key1, n)
		}
		s1 := scopeKey(api1, route1, p1, key1)
		s2 := scopeKey(api2, route2, p2, key2)

		a, r, p, k := unscope(t, s1)
		if a != api1 || r != route1 || k != key1 {
			t.Fatalf("unscope(scopeKey(%q, %q, %q, %q)) = %q, %q, _, %q", api1, route1, p1, key1, a, r, k)
		}
		if (p == "-") != (p1 == "") || (p1 != "" && (len(p) != 32 || strings.Trim(p, "0123456789abcdef") != "")) {
			t.Fatalf("scopeKey principal field %q for principal %q: want - for none, else 32 hex digits", p, p1)
		}
		same := api1 == api2 && route1 == route2 && p1 == p2 && key1 == key2
		if s1 == s2 && !same {
			t.Fatalf("scopeKey(%q, %q, %q, %q) = scopeKey(%q, %q, %q, %q) = %q", api1, route1, p1, key1, api2, route2, p2, key2, s1)
		}

		for _, prefix := range []string{"", "payments-api"} {
			g := New(nopStore{}, &Config{Prefix: prefix, Unprefixed: prefix == ""})
			k1, k2 := g.Key(s1), g.Key(s2)
			if (k1 == k2) != (s1 == s2) {
				t.Fatalf("prefix %q: Key(%d-byte scope) == Key(%d-byte scope) is %v, scopes equal %v", prefix, len(s1), len(s2), k1 == k2, s1 == s2)
			}
			if len(k1) > MaxStoreKeyBytes {
				t.Fatalf("prefix %q: Key(%d-byte scope) is %d bytes, over %d", prefix, len(s1), len(k1), MaxStoreKeyBytes)
			}
			if utf8.ValidString(g.cfg.Prefix+s1) && CheckStoreKey(k1) != nil {
				t.Fatalf("prefix %q: Key(%d-byte valid UTF-8 scope) is refused: %v", prefix, len(s1), CheckStoreKey(k1))
			}
			full := s1
			if g.cfg.Prefix != "" {
				full = g.cfg.Prefix + "#" + s1
			}
			if len(full) > maxReadableKey && !strings.Contains(k1, "#sha256:") {
				t.Fatalf("prefix %q: Key(%d-byte scope) was not shortened", prefix, len(s1))
			}
		}
	})
}

// nopStore is a Store for guards whose Key alone is used.
type nopStore struct{ Store }
