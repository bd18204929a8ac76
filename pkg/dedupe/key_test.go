package dedupe

import (
	"errors"
	"strings"
	"testing"
)

func TestParseKey(t *testing.T) {
	long := strings.Repeat("x", MaxKeyLength)
	tests := []struct {
		name  string
		value string
		want  string // "" means invalid
	}{
		{"bare", "abc", "abc"},
		{"bare uuid", "8e03978e-40d5-43e8-bc93-6894a57f9324", "8e03978e-40d5-43e8-bc93-6894a57f9324"},
		{"structured field string", `"abc"`, "abc"},
		{"sf string with escaped quote", `"a\"b"`, `a"b`},
		{"sf string with escaped backslash", `"a\\b"`, `a\b`},
		{"sf string with spaces inside", `"a b c"`, "a b c"},
		{"surrounding whitespace ignored", " \t\"abc\" \t", "abc"},
		{"bare with surrounding whitespace", "  abc  ", "abc"},
		{"bare with inner space", "a b", "a b"},
		{"bare with quote inside", `ab"c`, `ab"c`},
		// Issue 9, case 7: payload 2.0 joins a repeated header with commas.
		{"bare with comma is refused", "a,b", ""},
		{"comma-joined repeat is refused", "order-1, order-2", ""},
		{"quoted with comma", `"a,b"`, "a,b"},
		{"max length bare", long, long},
		{"max length quoted", `"` + long + `"`, long},
		{"printable ascii range", " !~", "!~"},
		{"empty", "", ""},
		{"only whitespace", " \t ", ""},
		{"empty sf string", `""`, ""},
		{"256 chars bare", long + "x", ""},
		{"256 chars quoted", `"` + long + `x"`, ""},
		{"non-ascii bare", "ключ", ""},
		{"non-ascii quoted", `"clé"`, ""},
		{"control char bare", "a\x01b", ""},
		{"DEL bare", "a\x7fb", ""},
		{"newline bare", "a\nb", ""},
		{"tab inside quoted", "\"a\tb\"", ""},
		{"unterminated quote", `"abc`, ""},
		{"unterminated after escape", `"abc\`, ""},
		{"only a quote", `"`, ""},
		{"bad escape", `"a\b"`, ""},
		{"trailing characters", `"abc"def`, ""},
		{"sf parameters", `"abc";v=1`, ""},
		{"two sf strings", `"a", "b"`, ""},
		{"escaped quote then end", `"a\"`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseKey(tt.value)
			if tt.want == "" {
				if err == nil || !errors.Is(err, ErrInvalidKey) {
					t.Errorf("ParseKey(%q) = %q, %v; want error wrapping ErrInvalidKey", tt.value, got, err)
				}
				if err != nil && strings.Contains(err.Error(), tt.value) && tt.value != "" && tt.value != `"` {
					t.Errorf("error %q echoes the value", err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("ParseKey(%q) = %q, %v; want %q", tt.value, got, err, tt.want)
			}
		})
	}
}

// TestScopeKeyInjective checks that no choice of API, route, principal
// and key can make two different requests share a scope, separator
// characters and escape sequences included.
func TestScopeKeyInjective(t *testing.T) {
	type tuple struct{ api, route, principal, key string }
	tuples := []tuple{
		{"", "POST /a", "p", "b|c"},
		{"", "POST /a|b", "p", "c"},
		{"", "POST /a%7Cb", "p", "c"},
		{"", "POST /a", "p", "b%7Cc"},
		{"", "POST /a", "p", "b%257Cc"},
		{"", "POST /a|p", "", "c"},
		{"", "POST /a", "", "p|c"},
		{"", "POST /a", "-", "c"},
		{"", "POST /a", "", "c"},
		{"", "POST /a", "p|x", "c"},
		{"", "POST /a", "p", "x|c"},
		{"", "POST /payments", "jwt:alice", "k"},
		{"", "POST /payments", "jwt:bob", "k"},
		{"", "PUT /payments", "jwt:alice", "k"},
		{"", "POST /refunds", "jwt:alice", "k"},
		{"", "POST /a%", "p", "c"},
		{"", "POST /a", "p", "%c"},
		// Issue 9, case 2: stages and APIs in front of one function.
		{"http:api1/dev", "POST /payments", "jwt:alice", "k"},
		{"http:api1/prod", "POST /payments", "jwt:alice", "k"},
		{"http:api2/prod", "POST /payments", "jwt:alice", "k"},
		{"rest:api1/prod", "POST /payments", "jwt:alice", "k"},
		{"http:api1/prod|POST /payments", "", "k", "x"},
		{"url:abc.lambda-url.eu-west-1.on.aws", "POST /payments", "", "k"},
	}
	seen := map[string]tuple{}
	for _, tr := range tuples {
		s := scopeKey(tr.api, tr.route, tr.principal, tr.key)
		if prev, ok := seen[s]; ok {
			t.Errorf("scopeKey%v = scopeKey%v = %q", tr, prev, s)
		}
		seen[s] = tr
		if tr.principal != "" && strings.Contains(s, tr.principal+"|") && len(tr.principal) > 1 {
			t.Errorf("scopeKey%v = %q holds the principal in clear", tr, s)
		}
	}
	if got, want := scopeKey("http:a1/prod", "POST /payments", "", "order-42"), "http:a1/prod|POST /payments|-|order-42"; got != want {
		t.Errorf("scopeKey = %q, want %q", got, want)
	}
}

// TestBoundKey checks issue 9, case 3: whatever the length of a scope
// (a long $default path escaped, a long caller-chosen key), the stored key
// fits every store, keeps a readable prefix, and stays injective.
func TestBoundKey(t *testing.T) {
	short := strings.Repeat("a", maxReadableKey)
	if got := boundKey(short); got != short {
		t.Errorf("boundKey(%d bytes) changed it", len(short))
	}
	seen := map[string]int{}
	for i, k := range []string{
		short + "b", short + "c", strings.Repeat("é", 3000), strings.Repeat("é", 3000) + "x",
		strings.Repeat("%7C", 5000), strings.Repeat("x", 959) + "€" + strings.Repeat("y", 100),
	} {
		got := boundKey(k)
		if len(got) <= maxReadableKey || len(got) > MaxStoreKeyBytes {
			t.Errorf("boundKey(%d bytes) = %d bytes, want %d < n <= %d", len(k), len(got), maxReadableKey, MaxStoreKeyBytes)
		}
		if err := CheckStoreKey(got); err != nil {
			t.Errorf("boundKey(%d bytes): %v", len(k), err)
		}
		if !strings.HasPrefix(k, got[:strings.Index(got, "#sha256:")]) {
			t.Errorf("boundKey(%d bytes) does not start with the key", len(k))
		}
		if j, dup := seen[got]; dup {
			t.Errorf("boundKey(#%d) = boundKey(#%d)", i, j)
		}
		seen[got] = i
	}
}

func FuzzParseKey(f *testing.F) {
	for _, s := range []string{"abc", `"abc"`, `"a\"b"`, `"a\\b"`, "", `"`, `"abc`, " x ", "ключ", "a\x00b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, value string) {
		key, err := ParseKey(value)
		if err != nil {
			if !errors.Is(err, ErrInvalidKey) {
				t.Fatalf("ParseKey(%q) error %v does not wrap ErrInvalidKey", value, err)
			}
			return
		}
		if len(key) < 1 || len(key) > MaxKeyLength {
			t.Fatalf("ParseKey(%q) = %q: length %d out of range", value, key, len(key))
		}
		for i := 0; i < len(key); i++ {
			if key[i] < 0x20 || key[i] > 0x7e {
				t.Fatalf("ParseKey(%q) = %q: byte %#x not printable ASCII", value, key, key[i])
			}
		}
		// A key survives being sent again as a Structured Field string.
		quoted := `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(key) + `"`
		if again, err := ParseKey(quoted); err != nil || again != key {
			t.Fatalf("ParseKey(%q) = %q, %v; want %q", quoted, again, err, key)
		}
	})
}
