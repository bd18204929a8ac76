package cli

import "testing"

// TestEmptyFieldsArePrinted: a field a record or key does not have is
// printed as a word, never as an empty column: the shared scope's absent
// principal, a record without request ID. A present one is escaped.
func TestEmptyFieldsArePrinted(t *testing.T) {
	if got := orDash(""); got != "- (shared scope)" {
		t.Errorf("orDash(\"\") = %q", got)
	}
	if got := orDash("user\x1b[2J"); got != `user\x1b[2J` {
		t.Errorf("orDash escapes nothing: %q", got)
	}
	if got := orNone(""); got != "none" {
		t.Errorf("orNone(\"\") = %q", got)
	}
	if got := orNone("req-1"); got != "req-1" {
		t.Errorf("orNone(\"req-1\") = %q", got)
	}
}
