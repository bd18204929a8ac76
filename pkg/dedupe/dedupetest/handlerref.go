package dedupetest

import (
	"bytes"
	"encoding/json"
	"math"
	"math/big"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
)

// The reference model of CheckHandlers: what each key, scope and
// fingerprint expression it draws selects from an event, written out by
// hand for that expression (not by a JMESPath interpreter), and whether
// the documented rules accept it. A key is refused when it is not a
// non-empty string, a whole number or a non-empty list of those, or was
// computed from a missing value (an argument that was null, a projection
// that skipped a null, a literal default taken for a missing or empty
// value), or from a number float64 cannot hold; a fingerprint is refused
// when it holds nothing but nulls and empty containers, when a function
// or operator turned a missing value into another, or when it holds a
// number that cannot be compared exactly.

// rv is a value of the reference model and what it derives from.
type rv struct {
	v       any // json.Number for numbers of the event, float64 for computed ones
	missing bool
	masked  bool
	inexact bool
	konst   bool
	err     bool
}

func (x rv) with(ys ...rv) rv {
	for _, y := range ys {
		x.missing = x.missing || y.missing
		x.masked = x.masked || y.masked
		x.inexact = x.inexact || y.inexact
		x.err = x.err || y.err
		x.konst = x.konst && y.konst
	}
	return x
}

// root returns the event as a reference value.
func root(tree any) rv { return rv{v: tree} }

// lit returns a literal.
func lit(v any) rv { return rv{v: v, konst: true, missing: v == nil} }

// get follows a path of member names.
func get(x rv, path ...string) rv {
	for _, name := range path {
		m, _ := x.v.(map[string]any)
		x.v = m[name]
		x.missing = x.missing || x.v == nil
	}
	return x
}

// list is a multi-select list.
func list(xs ...rv) rv {
	out := rv{konst: true}
	vals := make([]any, len(xs))
	for i, x := range xs {
		vals[i] = x.v
		out = out.with(x)
		out.missing = out.missing || x.v == nil
	}
	out.v = vals
	return out
}

// hash is a multi-select hash.
func hash(names []string, xs ...rv) rv {
	out := rv{konst: true}
	m := map[string]any{}
	for i, x := range xs {
		m[names[i]] = x.v
		out = out.with(x)
		out.missing = out.missing || x.v == nil
	}
	out.v = m
	return out
}

// project is x[*].f: nulls are dropped, which makes the result missing.
func project(x rv, f func(rv) rv) rv {
	l, ok := x.v.([]any)
	if !ok {
		return rv{missing: true}.with(x)
	}
	out := x
	vals := []any{}
	for _, e := range l {
		elem := x
		elem.v = e
		r := f(elem)
		if r.v == nil {
			out.missing = true
			continue
		}
		vals = append(vals, r.v)
		out = out.with(r)
	}
	out.v = vals
	return out
}

// values is x.*: the members' values in key order, nulls dropped.
func values(x rv) rv {
	m, ok := x.v.(map[string]any)
	if !ok {
		return rv{missing: true}.with(x)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	l := make([]any, len(keys))
	for i, k := range keys {
		l[i] = m[k]
	}
	y := x
	y.v = l
	return project(y, func(e rv) rv { return e })
}

// filter is x[?cond].f: a missing field in cond excludes the element.
func filter(x rv, cond func(rv) bool, f func(rv) rv) rv {
	l, ok := x.v.([]any)
	if !ok {
		return rv{missing: true}.with(x)
	}
	var kept []any
	for _, e := range l {
		elem := x
		elem.v = e
		if cond(elem) {
			kept = append(kept, e)
		}
	}
	y := x
	y.v = append([]any{}, kept...)
	return project(y, f)
}

// falsy is JMESPath's false.
func falsy(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case bool:
		return !x
	case string:
		return x == ""
	case []any:
		return len(x) == 0
	case map[string]any:
		return len(x) == 0
	}
	return false
}

// or is a || b.
func or(a, b rv) rv {
	if !falsy(a.v) {
		return a
	}
	if b.konst {
		b.missing, b.masked = true, true
	}
	return b
}

// notNull is not_null(xs...).
func notNull(xs ...rv) rv {
	for i, x := range xs {
		if x.v != nil {
			if x.konst && i > 0 {
				x.missing, x.masked = true, true
			}
			return x
		}
	}
	out := rv{konst: true}.with(xs...)
	out.missing = true
	return out
}

// toFloat converts the numbers in v to float64, and says whether one
// changed value (its shortest float64 form has another value).
func toFloat(v any) (any, bool) {
	switch x := v.(type) {
	case json.Number:
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil {
			return 0.0, true
		}
		a, _ := new(big.Rat).SetString(string(x))
		b, _ := new(big.Rat).SetString(strconv.FormatFloat(f, 'g', -1, 64))
		return f, a == nil || b == nil || a.Cmp(b) != 0
	case []any:
		out, lossy := make([]any, len(x)), false
		for i, y := range x {
			var l bool
			out[i], l = toFloat(y)
			lossy = lossy || l
		}
		return out, lossy
	case map[string]any:
		out, lossy := map[string]any{}, false
		for k, y := range x {
			var l bool
			out[k], l = toFloat(y)
			lossy = lossy || l
		}
		return out, lossy
	}
	return v, false
}

// call applies a function to the arguments' values (numbers as float64);
// f returns false when an argument has a type the function does not take.
func call(f func(args []any) (any, bool), xs ...rv) rv {
	return apply(f, false, xs...)
}

// carry is call for a function that only counts or lists what a list or
// object holds (length, keys): such an argument is passed as it is, so
// that a number float64 cannot hold inside it changes nothing.
func carry(f func(args []any) (any, bool), xs ...rv) rv {
	return apply(f, true, xs...)
}

func apply(f func(args []any) (any, bool), carried bool, xs ...rv) rv {
	out := rv{konst: true}.with(xs...)
	args := make([]any, len(xs))
	for i, x := range xs {
		switch x.v.(type) {
		case []any, map[string]any:
			if carried {
				args[i] = x.v
				continue
			}
		}
		var lossy bool
		args[i], lossy = toFloat(x.v)
		out.inexact = out.inexact || lossy
	}
	res, ok := f(args)
	if !ok {
		out.err = true
		return out
	}
	out.masked = out.masked || (out.missing && res != nil)
	out.missing = out.missing || res == nil
	out.v = res
	return out
}

func fToString(a []any) (any, bool) {
	if s, ok := a[0].(string); ok {
		return s, true
	}
	b, err := json.Marshal(a[0])
	return string(b), err == nil
}

func fType(a []any) (any, bool) {
	switch a[0].(type) {
	case nil:
		return "null", true
	case bool:
		return "boolean", true
	case float64:
		return "number", true
	case string:
		return "string", true
	case []any:
		return "array", true
	}
	return "object", true
}

func fLower(a []any) (any, bool) {
	s, ok := a[0].(string)
	return strings.ToLower(s), ok
}

func fLength(a []any) (any, bool) {
	switch x := a[0].(type) {
	case string:
		return float64(utf8.RuneCountInString(x)), true
	case []any:
		return float64(len(x)), true
	case map[string]any:
		return float64(len(x)), true
	}
	return nil, false
}

func fSum(a []any) (any, bool) {
	l, ok := a[0].([]any)
	if !ok {
		return nil, false
	}
	s := 0.0
	for _, x := range l {
		f, ok := x.(float64)
		if !ok {
			return nil, false
		}
		s += f
	}
	return s, true
}

func fJoin(a []any) (any, bool) {
	sep, ok1 := a[0].(string)
	l, ok2 := a[1].([]any)
	if !ok1 || !ok2 {
		return nil, false
	}
	parts := make([]string, len(l))
	for i, x := range l {
		s, ok := x.(string)
		if !ok {
			return nil, false
		}
		parts[i] = s
	}
	return strings.Join(parts, sep), true
}

func fKeys(a []any) (any, bool) {
	m, ok := a[0].(map[string]any)
	if !ok {
		return nil, false
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]any, len(keys))
	for i, k := range keys {
		out[i] = k
	}
	return out, true
}

// pjson is powertools_json(x): its numbers stay exact.
func pjson(x rv) rv {
	s, ok := x.v.(string)
	if !ok {
		x.err = true
		return x
	}
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil || dec.More() {
		x.err = true
		return x
	}
	if _, err := dec.Token(); err == nil {
		x.err = true
		return x
	}
	out := x
	out.v = v
	out.masked = out.masked || (x.missing && v != nil)
	out.missing = out.missing || v == nil
	return out
}

// refKey returns the reference key of a selection, in a form of the
// model's own ("s:…", "n:…", "[…]"), and whether the rules accept it.
func refKey(x rv) (string, bool) {
	if x.err || x.missing || x.inexact {
		return "", false
	}
	if l, ok := x.v.([]any); ok {
		if len(l) == 0 {
			return "", false
		}
		parts := make([]string, len(l))
		for i, e := range l {
			p, ok := refScalar(e)
			if !ok {
				return "", false
			}
			parts[i] = strconv.Quote(p)
		}
		return "[" + strings.Join(parts, ",") + "]", true
	}
	return refScalar(x.v)
}

func refScalar(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return "s:" + x, x != "" && utf8.ValidString(x)
	case json.Number:
		r, ok := new(big.Rat).SetString(string(x))
		if !ok || !r.IsInt() {
			return "", false
		}
		return "n:" + r.Num().String(), true
	case float64:
		if x != math.Trunc(x) || math.Abs(x) >= 1<<53 {
			return "", false
		}
		return "n:" + strconv.FormatInt(int64(x), 10), true
	}
	return "", false
}

// refFingerprint returns the canonical JSON of a fingerprint selection,
// and whether the rules accept it.
func refFingerprint(x rv) (string, bool) {
	if x.err || x.masked || x.inexact || empty(x.v) || bigFloat(x.v) {
		return "", false
	}
	b, err := json.Marshal(x.v)
	if err != nil {
		return "", false
	}
	c, err := dedupe.CanonicalJSON(b)
	return string(c), err == nil
}

// empty reports whether v holds only nulls and empty containers.
func empty(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case []any:
		for _, y := range x {
			if !empty(y) {
				return false
			}
		}
		return true
	case map[string]any:
		for _, y := range x {
			if !empty(y) {
				return false
			}
		}
		return true
	}
	return false
}

// bigFloat reports whether v holds a computed whole number of 2^53 or
// more.
func bigFloat(v any) bool {
	switch x := v.(type) {
	case float64:
		return x == math.Trunc(x) && math.Abs(x) >= 1<<53
	case []any:
		for _, y := range x {
			if bigFloat(y) {
				return true
			}
		}
	case map[string]any:
		for _, y := range x {
			if bigFloat(y) {
				return true
			}
		}
	}
	return false
}

// hcExpr is an expression the checker draws, with its reference. bad
// names the refusal CompileExpr or Handler must give at construction
// ("" when it must be accepted).
type hcExpr struct {
	src string
	ref func(tree any) rv
	bad string
}

// Where the drawn expressions look: base is the path of the order in
// the event's tree (the whole event for a custom type, "detail" of an
// EventBridge event, powertools_json(body) of an HTTP request).
func hcKeyExprs(base string, order func(tree any) rv) []hcExpr {
	p := func(s string) string {
		if base == "" {
			return s
		}
		return base + "." + s
	}
	o := order
	return []hcExpr{
		{src: p("id"), ref: func(t any) rv { return get(o(t), "id") }},
		{src: p("detail.orderId"), ref: func(t any) rv { return get(o(t), "detail", "orderId") }},
		{src: p("account"), ref: func(t any) rv { return get(o(t), "account") }},
		{src: p("[tenant, id]"), ref: func(t any) rv { x := o(t); return nonNull(x, list(get(x, "tenant"), get(x, "id"))) }},
		{src: p("detail.[orderId, currency]"), ref: func(t any) rv {
			d := get(o(t), "detail")
			return nonNull(d, list(get(d, "orderId"), get(d, "currency")))
		}},
		{src: "to_string(" + p("id") + ")", ref: func(t any) rv { return call(fToString, get(o(t), "id")) }},
		{src: "type(" + p("detail.orderId") + ")", ref: func(t any) rv { return call(fType, get(o(t), "detail", "orderId")) }},
		{src: "lower(" + p("detail.currency") + ")", ref: func(t any) rv { return call(fLower, get(o(t), "detail", "currency")) }},
		{src: "join('-', [" + p("tenant") + ", to_string(" + p("id") + ")])", ref: func(t any) rv {
			return call(fJoin, lit("-"), list(get(o(t), "tenant"), call(fToString, get(o(t), "id"))))
		}},
		{src: "not_null(" + p("detail.orderId") + ", " + p("id") + ")", ref: func(t any) rv { return notNull(get(o(t), "detail", "orderId"), get(o(t), "id")) }},
		{src: p("detail.orderId") + " || " + p("id"), ref: func(t any) rv { return or(get(o(t), "detail", "orderId"), get(o(t), "id")) }},
		{src: p("detail.orderId") + " || 'none'", ref: func(t any) rv { return or(get(o(t), "detail", "orderId"), lit("none")) }},
		{src: "not_null(" + p("detail.orderId") + ", 'none')", ref: func(t any) rv { return notNull(get(o(t), "detail", "orderId"), lit("none")) }},
		{src: p("detail.lines[*].sku"), ref: func(t any) rv { return project(get(o(t), "detail", "lines"), func(e rv) rv { return get(e, "sku") }) }},
		{src: p("detail.lines[?price].sku"), ref: func(t any) rv {
			return filter(get(o(t), "detail", "lines"), func(e rv) bool { return !falsy(get(e, "price").v) }, func(e rv) rv { return get(e, "sku") })
		}},
		{src: "length(" + p("detail.lines") + ")", ref: func(t any) rv { return carry(fLength, get(o(t), "detail", "lines")) }},
		{src: "sum(" + p("detail.lines[*].price") + ")", ref: func(t any) rv {
			return call(fSum, project(get(o(t), "detail", "lines"), func(e rv) rv { return get(e, "price") }))
		}},
		{src: "keys(" + p("detail") + ")", ref: func(t any) rv { return carry(fKeys, get(o(t), "detail")) }},
		{src: p("detail.amount"), ref: func(t any) rv { return get(o(t), "detail", "amount") }},
		{src: "to_string(" + p("detail.amount") + ")", ref: func(t any) rv { return call(fToString, get(o(t), "detail", "amount")) }},
		{src: "lower(" + p("detail.card") + ")", ref: func(t any) rv { return call(fLower, get(o(t), "detail", "card")) }},
		{src: "lower(" + p("detail") + ")", ref: func(t any) rv { return call(fLower, get(o(t), "detail")) }},
		{src: "join(',', " + p("detail.lines[*].price") + ")", ref: func(t any) rv {
			return call(fJoin, lit(","), project(get(o(t), "detail", "lines"), func(e rv) rv { return get(e, "price") }))
		}},
		{src: "powertools_json(" + p("note") + ").ref", ref: func(t any) rv { return get(pjson(get(o(t), "note")), "ref") }},
		{src: p("detail.{b: currency, a: card}.*"), ref: func(t any) rv {
			d := get(o(t), "detail")
			return nonNull(d, values(hash([]string{"b", "a"}, get(d, "currency"), get(d, "card"))))
		}},
		// Refused at construction: decided by the expression alone.
		{src: "not_null()", bad: "not_null() called with 0 arguments"},
		{src: "zip(" + p("detail.lines") + ")", bad: "zip() called with 1 arguments"},
		{src: "merge()", bad: "merge() called with 0 arguments"},
		{src: "'order-1'", bad: "reads nothing of the event"},
		{src: p("id") + " == 'x'", bad: "never a key"},
		{src: "{a: " + p("id") + "}", bad: "never a key"},
		{src: "lower({a: " + p("id") + "})", bad: "lower() argument 1 is always an object"},
		{src: "abs('1')", bad: "abs() argument 1 is always a string"},
	}
}

// nonNull is a multi-select on x: null when x is.
func nonNull(x, sel rv) rv {
	if x.v == nil {
		return rv{missing: true}.with(x)
	}
	return sel
}

// hcFingerprintExprs are the fingerprints the checker draws ("" is the
// event type's default).
func hcFingerprintExprs(base string, order func(tree any) rv) []hcExpr {
	p := func(s string) string {
		if base == "" {
			return s
		}
		return base + "." + s
	}
	o := order
	return []hcExpr{
		{src: ""}, {src: ""}, {src: ""}, {src: ""}, // the event type's default
		{src: p("detail.[amount, currency]"), ref: func(t any) rv {
			d := get(o(t), "detail")
			return nonNull(d, list(get(d, "amount"), get(d, "currency")))
		}},
		{src: p("detail.{amount: amount, currency: currency}"), ref: func(t any) rv {
			d := get(o(t), "detail")
			return nonNull(d, hash([]string{"amount", "currency"}, get(d, "amount"), get(d, "currency")))
		}},
		{src: p("detail.lines[*].price"), ref: func(t any) rv { return project(get(o(t), "detail", "lines"), func(e rv) rv { return get(e, "price") }) }},
		{src: p("detail"), ref: func(t any) rv { return get(o(t), "detail") }},
		{src: p("detail.amount"), ref: func(t any) rv { return get(o(t), "detail", "amount") }},
		{src: "to_string(" + p("detail.amount") + ")", ref: func(t any) rv { return call(fToString, get(o(t), "detail", "amount")) }},
		{src: "[" + p("account") + ", " + p("detail.amount") + "]", ref: func(t any) rv { return list(get(o(t), "account"), get(o(t), "detail", "amount")) }},
		{src: p("detail.amount") + " || 'none'", ref: func(t any) rv { return or(get(o(t), "detail", "amount"), lit("none")) }},
		{src: p("detail.{b: currency, a: amount}.*"), ref: func(t any) rv {
			d := get(o(t), "detail")
			return nonNull(d, values(hash([]string{"b", "a"}, get(d, "currency"), get(d, "amount"))))
		}},
		{src: "`{\"v\": 1}`", bad: "reads nothing of the event"},
		{src: "lower({a: " + p("id") + "})", bad: "lower() argument 1 is always an object"},
	}
}

// hcScopeExprs are the scopes the checker draws for custom events.
func hcScopeExprs() []hcExpr {
	return []hcExpr{
		{src: "tenant", ref: func(t any) rv { return get(root(t), "tenant") }},
		{src: "tenant", ref: func(t any) rv { return get(root(t), "tenant") }},
		{src: "'orders'", ref: func(any) rv { return lit("orders") }},
		{src: "[tenant, 'orders']", ref: func(t any) rv { return list(get(root(t), "tenant"), lit("orders")) }},
		{src: "tenant == 'a'", bad: "HandlerConfig.Scope"},
	}
}

// canonical returns the canonical JSON of b, or b.
func canonical(b []byte) string {
	if c, err := dedupe.CanonicalJSON(b); err == nil {
		return string(c)
	}
	return string(b)
}

// decodeTree decodes JSON as expressions see it, numbers exact.
func decodeTree(b []byte) any {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return nil
	}
	return v
}
