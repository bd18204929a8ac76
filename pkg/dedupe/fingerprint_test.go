package dedupe

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestCanonicalJSON(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string // "" means not JSON
	}{
		{"object keys sorted", `{"b":1,"a":2}`, `{"a":2,"b":1}`},
		{"whitespace dropped", " {\n\t\"a\" : [ 1 , 2 ] ,\r\n \"b\" : { } }\n", `{"a":[1,2],"b":{}}`},
		{"nested objects sorted", `{"z":{"y":1,"x":[{"b":1,"a":0}]},"a":null}`, `{"a":null,"z":{"x":[{"a":0,"b":1}],"y":1}}`},
		{"numbers kept as written", `[1, 1.0, 1e2, -0, 0.10]`, `[1,1.0,1e2,-0,0.10]`},
		{"big integer exact", `{"n":123456789012345678901234567890}`, `{"n":123456789012345678901234567890}`},
		{"long decimal exact", `0.1000000000000000055511151231257827`, `0.1000000000000000055511151231257827`},
		{"escapes decoded", `"\u0041\/\u00e9\t"`, "\"A/é\\t\""},
		{"surrogate pair", `"\ud83d\ude00"`, `"😀"`},
		{"lone surrogate", `"\ud83d!"`, "\"\uFFFD!\""},
		{"control char re-escaped", `"\u0001"`, `"\u0001"`},
		{"quote and backslash escaped", `"\"\\"`, `"\"\\"`},
		{"key escapes decoded before sorting", `{"\u0062":1,"a":2}`, `{"a":2,"b":1}`},
		{"duplicate keys keep their order", `{"a":2,"b":0,"a":1}`, `{"a":2,"a":1,"b":0}`},
		{"scalar runs in arrays", `[1, "a", {"b":2}, 3, 4, [5, 6], "\u0041", 7]`, `[1,"a",{"b":2},3,4,[5,6],"A",7]`},
		{"deep nesting", strings.Repeat(`{"b":1,"a":[`, 500) + strings.Repeat(`]}`, 500), strings.Repeat(`{"a":[`, 500) + strings.Repeat(`],"b":1}`, 500)},
		{"literals", ` [true,false,null] `, `[true,false,null]`},
		{"empty array and object", `[[],{}]`, `[[],{}]`},
		{"scalar", ` "x" `, `"x"`},
		{"not JSON", `{"a":}`, ""},
		{"two values", `{} {}`, ""},
		{"empty", ``, ""},
		{"form body", `amount=1250&currency=EUR`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := CanonicalJSON([]byte(tt.in))
			if tt.want == "" {
				if err == nil {
					t.Errorf("CanonicalJSON(%q) = %q, want error", tt.in, got)
				}
				return
			}
			if err != nil || string(got) != tt.want {
				t.Errorf("CanonicalJSON(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestFingerprint(t *testing.T) {
	tests := []struct {
		name string
		a, b []byte
		same bool
	}{
		{"reordered keys and whitespace", []byte(`{"amount":1250,"currency":"EUR"}`), []byte("{ \"currency\" : \"EUR\",\n \"amount\": 1250 }"), true},
		{"1.0 vs 1", []byte(`{"amount":1}`), []byte(`{"amount":1.0}`), false},
		{"big numbers differing in the last digit", []byte(`{"n":12345678901234567890123}`), []byte(`{"n":12345678901234567890124}`), false},
		{"big numbers beyond float64, equal", []byte(`{"n":9007199254740993}`), []byte(`{"n": 9007199254740993}`), true},
		{"float64-equal but different numbers", []byte(`{"n":9007199254740993}`), []byte(`{"n":9007199254740992}`), false},
		{"escaped and plain strings", []byte(`{"s":"\u00e9"}`), []byte(`{"s":"é"}`), true},
		{"raw bodies compared raw", []byte("amount=1&b=2"), []byte("b=2&amount=1"), false},
		{"raw body equal", []byte("\x00\x01binary"), []byte("\x00\x01binary"), true},
		{"non-JSON vs its JSON look-alike", []byte(`{"a":1`), []byte(`{"a":1}`), false},
		{"empty vs null", []byte(``), []byte(`null`), false},
		{"array order matters", []byte(`[1,2]`), []byte(`[2,1]`), false},
		{"duplicate keys in different order", []byte(`{"a":1,"a":2}`), []byte(`{"a":2,"a":1}`), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fa, fb := Fingerprint(tt.a, "POST", "POST /payments"), Fingerprint(tt.b, "POST", "POST /payments")
			if (fa == fb) != tt.same {
				t.Errorf("Fingerprint(%q) == Fingerprint(%q): got %v, want %v", tt.a, tt.b, fa == fb, tt.same)
			}
			if len(fa) != 64 {
				t.Errorf("fingerprint %q: got %d hex digits, want 64", fa, len(fa))
			}
		})
	}
	// Parts are length-prefixed: moving a boundary changes the result.
	if Fingerprint(nil, "ab", "c") == Fingerprint(nil, "a", "bc") {
		t.Error(`Fingerprint(nil, "ab", "c") == Fingerprint(nil, "a", "bc")`)
	}
	if Fingerprint([]byte("x"), "a") == Fingerprint([]byte("ax")) {
		t.Error("a part can run into the body")
	}
}

func FuzzCanonicalJSON(f *testing.F) {
	for _, s := range []string{`{"b":1,"a":[1,2,{"d":null,"c":true}]}`, `"\ud83d\ude00"`, `"\ud83d"`, `1.0e+3`, `{"a":"\u0000"}`, `[]`, `{"":{"":""}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		canon, err := CanonicalJSON(data)
		if err != nil {
			if json.Valid(data) {
				t.Fatalf("CanonicalJSON(%q) failed on valid JSON: %v", data, err)
			}
			return
		}
		if !json.Valid(canon) {
			t.Fatalf("CanonicalJSON(%q) = %q, not valid JSON", data, canon)
		}
		// Idempotent: the canonical form is its own canonical form.
		again, err := CanonicalJSON(canon)
		if err != nil || !bytes.Equal(again, canon) {
			t.Fatalf("CanonicalJSON(%q) = %q, then %q (%v)", data, canon, again, err)
		}
		// Same value as encoding/json sees it (numbers compared as text).
		var v1, v2 any
		d1 := json.NewDecoder(bytes.NewReader(data))
		d1.UseNumber()
		d2 := json.NewDecoder(bytes.NewReader(canon))
		d2.UseNumber()
		if d1.Decode(&v1) != nil || d2.Decode(&v2) != nil {
			return
		}
		if !reflect.DeepEqual(v1, v2) {
			t.Fatalf("CanonicalJSON(%q) = %q changes the value: %#v vs %#v", data, canon, v1, v2)
		}
	})
}
