package dedupe_test

import (
	"testing"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
)

// TestLoneSurrogateScannerEdges: text that ends inside an escape is
// refused as JSON, never read past its end; the first and the last low
// surrogates (\udc00, \udfff) complete a pair; and avg's mean of whole
// numbers is exact.
func TestLoneSurrogateScannerEdges(t *testing.T) {
	e := dedupe.MustCompileExpr("id")
	for _, raw := range []string{`"a\`, `{"id": "\ud800`, `{"id": "\ud800\`, `{"id": "\ud800\u`, `{"id": "\ud800\udc0`} {
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("Key of %q panicked: %v", raw, r)
				}
			}()
			if _, err := e.Key([]byte(raw)); err == nil {
				t.Errorf("Key of %q: no error, want it refused", raw)
			}
		}()
	}
	for _, raw := range []string{`{"id": "\ud800\udc00"}`, `{"id": "\udbff\udfff"}`} {
		if _, err := e.Key([]byte(raw)); err != nil {
			t.Errorf("Key of %s, a valid pair: %v", raw, err)
		}
	}
	if got, err := dedupe.MustCompileExpr("to_string(avg(l))").Payload([]byte(`{"l": [2, 4]}`)); err != nil || string(got) != `"3"` {
		t.Errorf("to_string(avg([2, 4])) = %s, %v; want \"3\"", got, err)
	}
}
