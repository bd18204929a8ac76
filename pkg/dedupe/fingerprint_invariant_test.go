package dedupe

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
)

// TestCanonicalJSONKeepsEveryEscape states that canonicalising never
// changes the value a string escape names: for every \uXXXX code unit,
// written with lower- or upper-case hex digits, CanonicalJSON's output
// decodes (by encoding/json) to the same string as its input.
func TestCanonicalJSONKeepsEveryEscape(t *testing.T) {
	for u := 0; u <= 0xffff; u++ {
		for _, format := range []string{`"\u%04x"`, `"\u%04X"`} {
			in := fmt.Sprintf(format, u)
			out, err := CanonicalJSON([]byte(in))
			if err != nil {
				t.Fatalf("CanonicalJSON(%s): %v", in, err)
			}
			var want, got string
			if err := json.Unmarshal([]byte(in), &want); err != nil {
				t.Fatalf("json.Unmarshal(%s): %v", in, err)
			}
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatalf("json.Unmarshal(CanonicalJSON(%s) = %s): %v", in, out, err)
			}
			if got != want {
				t.Fatalf("CanonicalJSON(%s) = %s, decodes to %q, want %q", in, out, got, want)
			}
		}
	}
}

// TestCanonicalJSONKeepsTheValue states that CanonicalJSON returns the
// value it was given, whatever its shape: its output decodes (by
// encoding/json) to a value equal to the input's, and canonicalising it
// again changes nothing. The documents mix empty and full containers with
// scalars, and put JSON punctuation inside strings, where it is not
// structure.
func TestCanonicalJSONKeepsTheValue(t *testing.T) {
	for _, in := range []string{
		`[[],1]`, `[{},"x"]`, `[[],[],1,2]`, `[1,[],2]`, `[{},{},true,null]`,
		`{"a":[[],1],"b":[{},2,3]}`, `[[[[]]],1]`,
		`"[[[[[["`, `"{{{{{{"`, `"::::::"`, `",,,,,,"`, `["[[[[","{{{{"]`,
		`{"{{{{":"[[[["}`, ` [ [ ] , 1 ] `, `""`, `[[1,2],"a",[]]`, `[[[1]],2,[]]`,
		`[{"a":[1]},"b",{}]`, `[[1],[2],3,[]]`, `[[[],[]],1,[]]`, `[{"a":{},"b":{}},1,{}]`,
	} {
		out, err := CanonicalJSON([]byte(in))
		if err != nil {
			t.Fatalf("CanonicalJSON(%s): %v", in, err)
		}
		var want, got any
		if err := json.Unmarshal([]byte(in), &want); err != nil {
			t.Fatalf("json.Unmarshal(%s): %v", in, err)
		}
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("CanonicalJSON(%s) = %s, not JSON: %v", in, out, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("CanonicalJSON(%s) = %s, decodes to %v, want %v", in, out, got, want)
		}
		again, err := CanonicalJSON(out)
		if err != nil || string(again) != string(out) {
			t.Errorf("CanonicalJSON(%s) = %s, %v, want %s (canonical already)", out, again, err, out)
		}
	}
}

// TestCanonicalJSONKeepsDuplicateKeysInOrder states the documented rule
// for members with equal keys: they keep their source order, so two
// documents that a last-wins decoder reads differently never share a
// canonical form.
func TestCanonicalJSONKeepsDuplicateKeysInOrder(t *testing.T) {
	for _, n := range []int{2, 3, 13, 50, 200} {
		in := []byte{'{'}
		want := []byte{'{'}
		for i := range n {
			if i > 0 {
				in = append(in, ',')
			}
			// Keys "z" and "a" alternate; each value is its position.
			k := "z"
			if i%2 == 1 {
				k = "a"
			}
			in = fmt.Appendf(in, `%q:%d`, k, i)
		}
		for i := 1; i < n; i += 2 {
			if len(want) > 1 {
				want = append(want, ',')
			}
			want = fmt.Appendf(want, `"a":%d`, i)
		}
		for i := 0; i < n; i += 2 {
			want = fmt.Appendf(want, `,"z":%d`, i)
		}
		in = append(in, '}')
		want = append(want, '}')
		got, err := CanonicalJSON(in)
		if err != nil {
			t.Fatalf("CanonicalJSON(%s): %v", in, err)
		}
		if string(got) != string(want) {
			t.Errorf("CanonicalJSON(%s) = %s, want %s", in, got, want)
		}
	}
}

// TestCanonicalJSONEscapesMinimally states the documented escaping: only
// '"', '\\' and control characters are escaped, so every other printable
// ASCII character comes out as itself, in a key or in a value that had to
// be decoded (`\u0041`).
func TestCanonicalJSONEscapesMinimally(t *testing.T) {
	for c := byte(0x20); c <= 0x7e; c++ {
		if c == '"' || c == '\\' {
			continue
		}
		s := string([]byte{'x', c})
		in := `{"` + s + `":"\u0041` + s + `"}`
		want := `{"` + s + `":"A` + s + `"}`
		got, err := CanonicalJSON([]byte(in))
		if err != nil {
			t.Fatalf("CanonicalJSON(%s): %v", in, err)
		}
		if string(got) != want {
			t.Errorf("CanonicalJSON(%s) = %s, want %s", in, got, want)
		}
	}
}
