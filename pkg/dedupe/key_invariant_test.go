package dedupe

import (
	"errors"
	"fmt"
	"testing"
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
