package dedupe

import (
	"encoding/json"
	"fmt"
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
