package dedupe_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	jmespath "github.com/jmespath-community/go-jmespath"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
)

// TestExprAgreesWithTheReference: on every expression below, what a
// compiled expression selects from a document (Expr.Payload) is what the
// reference JMESPath interpreter (go-jmespath's Search) selects, and a
// selection the reference finds null is refused, never a value. Key
// expressions pick the idempotency key, so an evaluator that drifted from
// the language would give two requests one key, or one request two. The
// expressions reach indexes at both ends and past them, comparisons,
// filters, projections, functions with variadic arguments and
// expression references, let-bound variables and pipes. A selection made
// of literals alone is refused, as the reference cannot: every event
// would share it.
func TestExprAgreesWithTheReference(t *testing.T) {
	doc := []byte(`{"a": [10, 20, 30], "b": {"c": 3, "d": 5, "s": "xyz"},
		"items": [{"id": "i1", "n": 1}, {"id": "i2", "n": 2}, {"id": "i3", "n": 3}],
		"empty": [], "nested": [[1, 2], [3, [4]]], "x": 7, "y": 7, "z": 9}`)
	var data any
	if err := json.Unmarshal(doc, &data); err != nil {
		t.Fatal(err)
	}
	literal := map[string]bool{"not_null(`\"v1\"`, x)": true}
	for _, expr := range []string{
		"a[0]", "a[1]", "a[2]", "a[3]", "a[-1]", "a[-3]", "a[-4]", "empty[0]",
		"a[0:2]", "a[::-1]", "b.s[0:2]",
		"b.c > b.d", "b.d > b.c", "b.c >= b.d", "x >= y", "x > y", "x < y", "x <= y", "z > x",
		"items[?n > `1`].id", "items[?n >= `2`].id", "items[?n < `3`].id", "items[?n == `2`] | [0].id",
		"items[*].id", "items[0].id", "items[-1].id", "items[].n", "nested[]", "nested[][]",
		"{first: a[0], last: a[-1]}", "[a[0], b.c]", "b.{c: c, d: d}",
		"join('-', items[*].id)", "max(a)", "min(a)", "sum(a)", "length(a)", "length(b.s)",
		"not_null(missing, b.c)", "not_null(missing, nope, x)", "merge(b, `{\"e\": 1}`)",
		"sort(a)", "reverse(a)", "to_string(x)", "contains(a, `20`)", "starts_with(b.s, 'x')",
		"let $v = b in $v.c", "let $v = a[0], $w = a[-1] in [$v, $w]",
		"a | [0]", "items | [1] | id", "b.c && b.d", "nope || b.c", "!empty",
		"[x, `1.5e2`]", "[x, `2`]", "[x, `-0.25`]",
		"a[1:]", "!b.c",
		"sort_by(items, &n)[0].id", "max_by(items, &n).id", "min_by(items, &id).id", "map(&id, items)", "map(&n, items)",
		"not_null(`\"v1\"`, x)", "[not_null(`\"v1\"`, x), y]", "merge(b, `{\"e\": 1}`, `{\"f\": 2}`)",
		"let $v = x in let $a = y, $b = z in [$v, $a, $b]",
		"x + z", "z - x", "x * z", "z / `2`", "z % `4`", "z // `2`", "-x", "+x", "-(z - x)", "[-x, +z]",
	} {
		want, err := jmespath.Search(expr, data)
		if err != nil {
			t.Fatalf("reference Search(%s): %v", expr, err)
		}
		got, err := dedupe.MustCompileExpr(expr).Payload(doc)
		if literal[expr] {
			if !errors.Is(err, dedupe.ErrNoFingerprint) {
				t.Errorf("%s: selected %s, %v; want a refusal of literals alone", expr, got, err)
			}
			continue
		}
		if want == nil {
			if err == nil {
				t.Errorf("%s: selected %s where the reference finds null; want a refusal", expr, got)
			}
			continue
		}
		if err != nil {
			if errors.Is(err, dedupe.ErrNoFingerprint) {
				t.Errorf("%s: refused (%v) where the reference selects %v", expr, err, want)
			} else {
				t.Errorf("%s: %v where the reference selects %v", expr, err, want)
			}
			continue
		}
		var sel any
		if err := json.Unmarshal(got, &sel); err != nil {
			t.Fatalf("%s: Payload %s is not JSON: %v", expr, got, err)
		}
		ref, _ := json.Marshal(want)
		var norm any
		_ = json.Unmarshal(ref, &norm)
		if !reflect.DeepEqual(sel, norm) {
			t.Errorf("%s: selected %s, the reference %s", expr, got, ref)
		}
	}
}
