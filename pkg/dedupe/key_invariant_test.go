package dedupe

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestParseKeyEscapesAreTransparent states that a quoted key's characters
// are accepted or refused the same way with or without an escape
// elsewhere in it, and that every printable ASCII character (0x20 to
// 0x7E, the range ParseKey documents) is accepted: for every byte c,
// `"xcy"` and `"x\\cy"` (key `x\cy`) are both accepted when c is
// printable and both refused otherwise.
func TestParseKeyEscapesAreTransparent(t *testing.T) {
	for c := 0; c <= 0xff; c++ {
		if c == '"' || c == '\\' {
			continue // these two must be escaped in a quoted key
		}
		printable := c >= 0x20 && c <= 0x7e
		for _, tc := range []struct{ value, want string }{
			{`"x` + string([]byte{byte(c)}) + `y"`, "x" + string([]byte{byte(c)}) + "y"},
			{`"x\\` + string([]byte{byte(c)}) + `y"`, `x\` + string([]byte{byte(c)}) + "y"},
		} {
			got, err := ParseKey(tc.value)
			name := fmt.Sprintf("ParseKey(%q)", tc.value)
			switch {
			case printable && err != nil:
				t.Errorf("%s: %v, want %q", name, err, tc.want)
			case printable && got != tc.want:
				t.Errorf("%s = %q, want %q", name, got, tc.want)
			case !printable && !errors.Is(err, ErrInvalidKey):
				t.Errorf("%s = %q, %v, want an error wrapping ErrInvalidKey", name, got, err)
			}
		}
	}
}

// TestParseKeyBareCommaAnywhere states that a bare key holding a comma
// anywhere, first character included, is refused: it may be a repeated
// header joined with commas, whose first value is not the whole.
func TestParseKeyBareCommaAnywhere(t *testing.T) {
	for _, v := range []string{",", ",abc", "abc,", "a,b"} {
		if got, err := ParseKey(v); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("ParseKey(%q) = %q, %v; want ErrInvalidKey", v, got, err)
		}
	}
}

// TestScopeKeyHashesTheWholePrincipal states that the principal's hash in
// a scoped key covers all of it, however long: two principals that share
// their first bytes (a long token's claims, an ARN) and differ only past
// them get different scopes, so neither can receive the other's answer.
func TestScopeKeyHashesTheWholePrincipal(t *testing.T) {
	for _, n := range []int{64, 127, 128, 129, 300} {
		common := strings.Repeat("p", n)
		a, b := scopeKey("api", "POST /x", common+"a", "k"), scopeKey("api", "POST /x", common+"b", "k")
		if a == b {
			t.Errorf("principals of %d bytes differing in the last one share the scope %q", n+1, a)
		}
		if got := scopeKey("api", "POST /x", common+"a", "k"); got != a {
			t.Errorf("principal of %d bytes: scope %q, then %q", n+1, a, got)
		}
	}
}

// TestBoundKeyKeepsAtMostItsPrefix states boundKey's documented form for
// a long key: its first bytes in clear, at most hashedKeyPrefix of them
// and cut at a UTF-8 boundary (never inside a character), then the hash;
// 1029 to 1032 bytes. Keys that are not UTF-8 at all are shortened too,
// never a panic.
func TestBoundKeyKeepsAtMostItsPrefix(t *testing.T) {
	for pad := 0; pad < 4; pad++ {
		// A 4-byte character over byte hashedKeyPrefix, wherever it starts.
		key := strings.Repeat("a", hashedKeyPrefix-pad) + strings.Repeat("\U0001F600", 100)
		got := boundKey(key)
		clear, _, ok := strings.Cut(got, "#sha256:")
		if !ok || len(clear) > hashedKeyPrefix || !strings.HasPrefix(key, clear) || !utf8.ValidString(clear) {
			t.Errorf("pad %d: clear part of %d bytes (valid UTF-8 %v), want a prefix of at most %d cut at a boundary", pad, len(clear), utf8.ValidString(clear), hashedKeyPrefix)
		}
		if len(got) < 1029 || len(got) > 1032 {
			t.Errorf("pad %d: %d bytes, want 1029 to 1032", pad, len(got))
		}
	}
	for _, key := range []string{strings.Repeat("\x80", maxReadableKey+1), "#" + strings.Repeat("\xbf", 2000)} {
		if got := boundKey(key); !strings.Contains(got, "#sha256:") || len(got) < 1029 || len(got) > 1032 {
			t.Errorf("boundKey of %d bytes not UTF-8 = %d bytes %.40q…, want 1029 to 1032", len(key), len(got), got)
		}
	}
}

// TestStoreKeyInjectiveForAnyBytes states StoreKey's injectivity for keys
// that are not UTF-8 too: a long key made of UTF-8 continuation bytes
// (which Guard.Do accepts from a caller) does not shorten to a form that
// a short, printable key maps to as it is. Before the fix its clear part
// was cut back to the prefix, giving "fn#sha256:<hex>", which the
// 71-byte key "sha256:<hex>" also gives.
func TestStoreKeyInjectiveForAnyBytes(t *testing.T) {
	long := strings.Repeat("\x80", 1100)
	a := StoreKey("fn", long)
	if short := strings.TrimPrefix(a, "fn#"); short != a && StoreKey("fn", short) == a {
		t.Errorf("StoreKey(fn, 1100 continuation bytes) = %q, which the %d-byte key %q also gives", a, len(short), short)
	}
	if StoreKey("", long) == StoreKey("", strings.Repeat("\x81", 1100)) {
		t.Error("two long keys that are not UTF-8 share a store key")
	}
}

// TestKeyRefIsTheWholeKeysHash states KeyRef's form, on which an
// operator relies to compute a record's reference from its stored key:
// "key:" and the first 12 hex digits of the SHA-256 of the whole key,
// at every length (short keys are hashed through a buffer, long ones
// not). Two long keys that differ only past their first bytes get
// references of their own.
func TestKeyRefIsTheWholeKeysHash(t *testing.T) {
	for _, n := range []int{0, 1, 255, 256, 257, 300, 2000} {
		key := strings.Repeat("k", n)
		sum := sha256.Sum256([]byte(key))
		if got, want := KeyRef(key), "key:"+hex.EncodeToString(sum[:6]); got != want {
			t.Errorf("KeyRef of a %d-byte key = %s, want %s", n, got, want)
		}
		if n > 0 && KeyRef(key) == KeyRef(key[:n-1]+"x") {
			t.Errorf("KeyRef of two %d-byte keys that differ in their last byte is one reference", n)
		}
	}
}
