package dedupe_test

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
)

// These tests attack the provenance rules after 04bdd22 (pad's own space
// is literal padding), as a fourth adversary (h43) found them, with the
// invariants and helpers of attack42b_keys_test.go:
//
//   - invariant 1 (no shared key): two events that differ in every value
//     the expression reads never get one key from Key(), nor one payload
//     from Payload(), unless one of them is refused (ErrNoKey,
//     ErrNoFingerprint) or the expression does not compile;
//   - invariant 2 (no false refusal): keys and fingerprints users write
//     over AWS events are accepted and tell two events apart;
//   - and evaluation never panics: a bad expression is an error at
//     CompileExpr, a bad event an error of Key or Payload.
//
// Every value of the events below holds secret42b, so that a test can
// tell whether an error echoes one.
//
// Five more findings were decided against, and their tests removed:
//
//   - values computed from a field that no event changes: replace's
//     literal replacement sliced (replace(pk, 'P#', 'ORDER-')[0:6]), a
//     sum or to_string of a filter that kept nothing (sum(items[?qty >
//     `100`].qty)), self-cancelling forms (amount - amount). Keys computed
//     from a field are the user's choice, shared by every event that
//     computes the same (HandlerConfig.Key, docs/powertools.md); refusing
//     replace's text would refuse replace(pk, '#', '-')[0:12] too.
//   - a map or [*] over a list that holds a literal beside fields
//     (map(&to_string(@), ['ORDER', detail.orderNumber])), and picks out
//     of a merge with a literal default (merge({tenant: 'default'},
//     detail).[tenant, orderId]) for an event without the field: refused,
//     as documented, with the advice to write the list itself or the
//     default with ||. Accepting them needs provenance per element.

// noPanic43 runs f and fails, naming what, when f panics.
func noPanic43(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("%s panicked: %v; want an error (ErrNoKey, or a compile error)", what, r)
		}
	}()
	f()
}

// TestAttack43InnerLostThroughFunctions states invariant 1 for a pick out
// of a list whose parts mix literals with fields (inner: a list of
// {k: 'v1', s: sku} objects, of join('-', ['v1', sku]) strings, of
// padded or to_string'd strings) after the list went through a function
// that hands its elements back: reverse, sort, sort_by, max_by,
// to_array, zip, group_by and map. Picked from the list itself (items[*].{k: 'v1', s: sku} |
// [0].k, items[*].join('-', ['v1', sku]) | [0][0:2]) the literal part is
// refused; through one of these functions it is accepted, and every
// event gets the key "v1" (or "00000000", `{"a"`). Two causes: derived()
// does not copy val.inner to a function's result, so reverse(list)[0] is
// a plain event pick; and the expression reference's input in call() is
// built from elem's konst, few and shaped only, so map(&k, list) sees
// each element as a plain event object even where elem is mixed.
// Hostile only, or nearly (a user truncating the first of several
// composed keys, sort(Records[*].join('#', ['ORDER', messageId]))[0][0:6],
// gets "ORDER#" for every batch). Fix: copy inner in derived()
// (inner: from.inner), and pass elem.mixed and elem.inner into the
// expression reference's input val in call(); in a scratch copy these
// two lines pass this test and fail no other test of the package.
func TestAttack43InnerLostThroughFunctions(t *testing.T) {
	a, b := base42b("1"), base42b("2")
	for _, src := range []string{
		"reverse([{k: 'v1', s: id}])[0].k",
		"reverse([join('-', ['v1', id])])[0][0:2]",
		"sort([join('-', ['v1', id])])[0][0:2]",
		"reverse([pad_left(id, `40`, '0')])[0][0:8]",
		"reverse([to_string({a: id})])[0][0:4]",
		"sort_by(items[*].{k: 'v1', s: sku}, &s)[0].k",
		"reverse(items[*].{k: 'v1', s: sku})[0].k",
		"to_array(items[*].{k: 'v1', s: sku})[0].k",
		"sort(items[*].join('-', ['v1', sku]))[0][0:2]",
		"sort(Records[*].join('#', ['ORDER', messageId]))[0][0:6]",
		"map(&{k: 'v1', s: sku}, items)[0].k",
		"map(&['v1', sku], items)[0][0]",
		"map(&join('-', ['v1', sku]), items)[0][0:2]",
		"map(&@, [join('-', ['v1', id])])[0][0:2]",
		"map(&k, map(&{k: 'v1', s: sku}, items))",
		"map(&k, items[*].{k: 'v1', s: sku})",
		"max_by(map(&{k: 'v1', s: sku}, items), &s).k",
		"sort_by(map(&{k: 'v1', s: sku}, items), &s)[0].k",
		"zip([join('-', ['v1', id])], [pk])[0][0][0:2]",
		"values(group_by(items[*].{k: 'v1', s: sku}, &s))[0][0].k",
	} {
		noShared42b(t, false, src, a, b)
	}
	for _, src := range []string{
		"reverse(items[*].{k: 'v1', s: sku})[0].k",
		"map(&k, map(&{k: 'v1', s: sku}, items))",
	} {
		noShared42b(t, true, src, a, b)
	}
}

// TestAttack43FindStartBeyondSubjectPanics states that evaluation never
// panics: find_first and find_last with a start beyond the subject's
// length (find_first(id, '-', `100`)), an end before the start, or a
// negative end slice the subject out of range inside JMESPath's function
// (jpfFindImpl: subject[start:end]) and panic. The start is the
// expression's, but the length is the event's: find_first(key, '/', `8`)
// works for every long key and panics for the first short one. Nothing
// in Key, Payload or call() recovers, so the invocation dies with a
// runtime panic (its stack trace in the logs) instead of an error
// wrapping ErrNoKey that names the expression and why, and an
// expression of literals alone panics CompileExpr itself (analyze
// evaluates it), i.e. Handler at init instead of refusing it. Plausibility: low for a key (positions are rarely keys), but
// the panic is reachable from event data alone. Fix: in call(), check
// find_first/find_last's start and end against the subject before the
// handler (a start beyond the subject, or an end before the start,
// finds nothing: null), or recover a panic of any function handler into
// an evalError naming the function.
func TestAttack43FindStartBeyondSubjectPanics(t *testing.T) {
	a := event42(t, base42b("1"))
	for _, src := range []string{
		"find_first(id, 'x', `100`)",
		"find_first(id, 'S', `2`, `1`)",
		"find_last(id, 'S', `0`, `-1`)",
		"find_last(Records[0].messageId, '-', `40`)",
		"[id, to_string(find_first(pk, '#', `64`))]",
	} {
		e, err := dedupe.CompileExpr(src)
		if err != nil {
			t.Errorf("CompileExpr(%q): %v", src, err)
			continue
		}
		noPanic43(t, fmt.Sprintf("Key %q", src), func() {
			if _, err := e.Key(a); err != nil && !errors.Is(err, dedupe.ErrNoKey) {
				t.Errorf("Key %q: %v; want ErrNoKey or a key", src, err)
			}
		})
		noPanic43(t, fmt.Sprintf("Payload %q", src), func() {
			if _, err := e.Payload(a); err != nil && !errors.Is(err, dedupe.ErrNoFingerprint) {
				t.Errorf("Payload %q: %v; want ErrNoFingerprint or a payload", src, err)
			}
		})
	}
	for _, src := range []string{"find_first('abc', 'b', `10`)", "find_last('abc', 'b', `0`, `-1`)"} {
		noPanic43(t, fmt.Sprintf("CompileExpr(%q)", src), func() { _, _ = dedupe.CompileExpr(src) })
	}
	// A range with nothing in it finds nothing (null), as a search of an
	// empty subject does: not an error of the function.
	for _, src := range []string{
		"find_first(id, 'x', `100`)",
		"find_first(id, 'S', `2`, `1`)",
		"find_last(id, 'S', `0`, `-1`)",
		"find_last(id, 'S', `-5`, `-3`)",
		"find_first(id, 'S', `1e300`)",
		"find_first(id, 'x', `100`, `200`)",
	} {
		e := dedupe.MustCompileExpr("[id, to_string(" + src + ")]")
		_, err := e.Key(a)
		if err == nil || strings.Contains(err.Error(), "failed on its arguments") || !strings.Contains(err.Error(), "null") && !strings.Contains(err.Error(), "missing") {
			t.Errorf("Key with %s: %v, want it refused for the null it found", src, err)
		}
	}
	// At the subject's end the range is empty but in range: null too.
	if v, err := dedupe.MustCompileExpr("find_first('abc', 'b', `3`)").Key(a); err == nil {
		t.Errorf("find_first at the subject's end selected %q, want null", v)
	}
}

// TestAttack43SortByLeavesTheEventAsItIs: a function given the event's
// own list gets a copy, so that sorting it (JMESPath's sort_by sorts its
// argument in place) does not reorder the event for the rest of the
// expression: [sort_by(items, &sku)[0].sku, items[0].sku] is the first
// item after sorting beside the first item as sent.
func TestAttack43SortByLeavesTheEventAsItIs(t *testing.T) {
	ev := []byte(`{"items": [{"sku": "b"}, {"sku": "a"}]}`)
	want, err := dedupe.MustCompileExpr("[items[1].sku, items[0].sku]").Key(ev)
	if err != nil {
		t.Fatal(err)
	}
	for _, src := range []string{"[sort_by(items, &sku)[0].sku, items[0].sku]", "[reverse(items)[0].sku, items[0].sku]"} {
		if got, err := dedupe.MustCompileExpr(src).Key(ev); err != nil || got != want {
			t.Errorf("Key %s = %q, %v; want %q: the function reordered the event", src, got, err, want)
		}
	}
}

// TestAttack43ToNumberOfLongDecimalIsInexact states invariant 1 for a
// number to_number parses from a string that float64 cannot hold
// exactly. Key and Payload refuse a number "computed from a number
// float64 cannot hold exactly" when the event gives it as a JSON number
// (to_string(big), big - `1`: floats() marks it lossy), but to_number's
// float64 from a string is never checked: to_string(to_number(id)) gives
// "9007199254740992" for the ids "9007199254740993" and
// "9007199254740992", and "12345678901234567000" for two 20-digit ids
// (snowflake ids, DynamoDB N values, SQS attributes are strings of this
// size); to_number(id) - `1` is one whole number below 2^53 for both; a
// fingerprint {amount: to_number(amount)} is {"amount":100} for the
// amounts "100.00000000000000001" and "100", so the second request
// (another amount, same key) is replayed instead of refused with
// ErrFingerprintMismatch. Plausible: to_string(to_number(x)) is how a
// user normalizes a numeric string ("007" to "7"), and query strings and
// form fields are strings a fingerprint converts. It also makes
// max_by(Records, &to_number(dynamodb.SequenceNumber)) (in 42b's Held
// list) choose among ties for 21-digit sequence numbers without saying
// so, which sort_by/max_by refuse for inexact JSON numbers. Fix: in
// call(), mark to_number's result inexact when its argument is a string
// whose decimal value is not the float64's (!sameDecimal(s,
// strconv.FormatFloat(f, 'g', -1, 64)), as floats() does for
// json.Number; strip a leading '+' first, and let hex, "Inf" and "NaN"
// strings count as inexact). In a scratch copy this passes the test and
// fails no other test of the package.
func TestAttack43ToNumberOfLongDecimalIsInexact(t *testing.T) {
	ev := func(id, n, amount string) string {
		return `{"id": "` + id + `", "n": "` + n + `", "amount": "` + amount + `", "tag": "` + secret42b + `"}`
	}
	a := ev("9007199254740993", "12345678901234567891", "100.00000000000000001")
	b := ev("9007199254740992", "12345678901234567892", "100")
	for _, src := range []string{
		"to_string(to_number(id))",
		"to_string(to_number(n))",
		"to_number(id) - `1`",
		"to_number(n) % `1000`",
		"join('#', ['ORDER', to_string(to_number(n))])",
	} {
		noShared42b(t, false, src, a, b)
	}
	for _, src := range []string{
		"{amount: to_number(amount)}",
		"to_number(amount)",
		"[to_string(to_number(n))]",
	} {
		noShared42b(t, true, src, a, b)
	}
}

// TestAttack43LoneSurrogateEscapesShareKey states invariant 1 for
// strings that JSON spells differently but encoding/json decodes alike:
// a lone surrogate escape ("o\ud800", "o\udbff", "o\udfff") decodes to
// U+FFFD, so the events {"id": "o\ud800"} and {"id": "o\udbff"} get one
// key, in the event and in a body powertools_json decodes; and an event
// given as a Go value whose string is not UTF-8 ("a\xff", "a\xfe") is
// re-encoded by json.Marshal with U+FFFD. decodeJSON refuses raw bytes
// that are not UTF-8 for exactly this reason ("encoding/json would make
// every invalid byte U+FFFD, so that two different strings would select
// one key"), but these two other roads reach the same U+FFFD. Hostile
// only: a client must send a lone surrogate (JavaScript strings can hold
// one; JSON.stringify escapes it), and a victim key must hold one or
// U+FFFD. (A handler that decodes with encoding/json sees the two events
// alike, which is the argument for leaving it; the raw-bytes rule says
// otherwise.) Fix: in decodeJSON, refuse a \u escape of a surrogate that
// is not the first of a valid pair ("not valid JSON: a lone surrogate"),
// as for invalid bytes; in eventTree, refuse a Go value whose strings are
// not valid UTF-8 (a reflect walk before json.Marshal), or say in Key's
// doc that such values are keyed as U+FFFD.
func TestAttack43LoneSurrogateEscapesShareKey(t *testing.T) {
	a, b := `{"id": "o\ud800`+secret42b+`"}`, `{"id": "o\udbff`+secret42b+`"}`
	for _, src := range []string{"id", "[id, 'v1']", "join('#', ['ORDER', id])"} {
		noShared42b(t, false, src, a, b)
	}
	noShared42b(t, true, "id", a, b)
	// U+FFFD itself, which a victim's key may hold, against a surrogate.
	noShared42b(t, false, "id", `{"id": "o\ufffd`+secret42b+`"}`, `{"id": "o\udfff`+secret42b+`"}`)
	bodyA := `{"body": "{\"orderId\": \"o\\ud800` + secret42b + `\"}"}`
	bodyB := `{"body": "{\"orderId\": \"o\\udc00` + secret42b + `\"}"}`
	noShared42b(t, false, "powertools_json(body).orderId", bodyA, bodyB)

	// A valid pair (an escaped emoji), and an escaped backslash before
	// "ud800", are strings like any other.
	e := dedupe.MustCompileExpr("id")
	for _, pair := range [][2]string{
		{`{"id": "o\ud83d\ude00"}`, `{"id": "o\ud83d\ude01"}`},
		{`{"id": "o\\ud800"}`, `{"id": "o\\udbff"}`},
		{`{"id": "\ud83d\ude00\udbff\udfff"}`, `{"id": "\ud83d\ude00"}`},
	} {
		k1, err1 := e.Key([]byte(pair[0]))
		k2, err2 := e.Key([]byte(pair[1]))
		if err1 != nil || err2 != nil || k1 == k2 {
			t.Errorf("Key id of %s and %s: %q, %v and %q, %v; want two keys", pair[0], pair[1], k1, err1, k2, err2)
		}
	}
	type order struct {
		ID string `json:"id"`
	}
	// U+FFFD itself, and the six characters \ufffd, are strings of a Go
	// value like any other.
	if k1, err1 := e.Key(order{"a\uFFFD"}); err1 != nil {
		t.Errorf("Key id of a Go value holding U+FFFD: %v", err1)
	} else if k2, err2 := e.Key(order{`a\ufffd`}); err2 != nil || k1 == k2 {
		t.Errorf("Key id of a Go value holding the text \\ufffd: %q, %v (U+FFFD's: %q)", k2, err2, k1)
	}
	k1, err1 := e.Key(order{"a\xff" + secret42b})
	k2, err2 := e.Key(order{"a\xfe" + secret42b})
	if err1 == nil && err2 == nil && k1 == k2 {
		t.Errorf("Key id of two Go events whose ids differ (invalid UTF-8 bytes) share %q", k1)
	}
}

// ebOrder43 is an EventBridge-like order event, every value ending in n,
// with no tenant or currency (the fields a merge gives a default).
func ebOrder43(n string) string {
	return `{"id": "` + secret42b + `e` + n + `", "source": "com.example", "detail": {"orderId": "` + secret42b + `o` + n +
		`", "orderNumber": ` + n + `01, "customer": "` + secret42b + `c` + n + `", "amount": ` + n + `0, "items": [{"sku": "` +
		secret42b + `s` + n + `", "qty": ` + n + `}]}}`
}

// bigIDs43 is an API Gateway request whose JSON body, and an
// EventBridge-like detail, hold 64-bit ids (snowflake ids, 19 digits,
// beyond 2^53) beside the strings and small numbers keys are made of;
// every value ends in n.
func bigIDs43(n string) string {
	s := secret42b
	body := mustJSON42b(map[string]any{"orderId": s + "o" + n, "customerId": json.Number("123456789012345678" + n), "requestedAt": "2026-01-0" + n,
		"items": []any{
			map[string]any{"sku": s + "s" + n, "qty": json.Number(n), "productId": json.Number("987654321098765432" + n)},
			map[string]any{"sku": s + "t" + n, "qty": json.Number("3" + n), "productId": json.Number("887654321098765432" + n)}}})
	return mustJSON42b(map[string]any{"body": body, "detail": map[string]any{"id": json.Number("123456789012345678" + n), "orderId": s + "d" + n,
		"metadata": map[string]any{"sentAt": "2026-01-0" + n},
		"items":    []any{map[string]any{"sku": s + "x" + n, "qty": json.Number(n), "productId": json.Number("987654321098765432" + n)}}}})
}

// TestAttack43CarriedBigNumberIsKey states invariant 2 for keys and
// fingerprints over a list or object that holds a whole number of 2^53
// or more (a 64-bit id) which the selection never reads: call()
// converts every argument with floats() and marks the result inexact if
// any number anywhere in it changed, so sort_by(items, &sku)[0].sku,
// max_by(items, &qty).sku, map(&sku, items), [id, length(items)],
// reverse(items)[0].sku and keys(detail) are refused ("computed its key
// from a number float64 cannot hold exactly") for every request whose
// body holds a productId of 19 digits, though the key is a string or a
// count; and the fingerprints 42b made acceptable,
// merge(powertools_json(body), {requestedAt: `null`}) and
// merge(detail, {metadata: `null`}), and sort_by(..., &sku) and
// map(&[sku, qty], items) are refused ("selected a number that cannot
// be compared exactly") for every such request, which none of them
// compares. The same expressions without the big id, and the bare
// projection items[*].sku, are accepted. Plausible: JSON APIs and
// events carry snowflake or database ids beyond 2^53 (Twitter, Discord,
// Sonyflake-style ids), and with this Fingerprint every request is
// refused, not one. Fix: in call(), convert to float64 (and mark
// inexact) only what the function reads as a number (abs, ceil, floor,
// sum, avg, max, min, sort, contains, to_string, to_number, and the
// number parameters); hand a list or object to the functions that only
// carry, order, count or name its parts (merge, reverse, to_array,
// values, keys, items, length, not_null, zip, from_items, and the lists
// of map, sort_by, max_by, min_by and group_by, whose expression
// reference's results are already converted and checked in the closure)
// with its json.Numbers as they are, so that what they return keeps the
// event's digits, as a projection does. In a scratch copy, passing the
// arguments of those fourteen functions unconverted passes this test
// and fails no other test of the package; but jpfSortBy sorts its list
// in place, so copy the containers as floats() does, without
// converting, or sort_by reorders the event for the rest of the
// expression.
func TestAttack43CarriedBigNumberIsKey(t *testing.T) {
	a, b := bigIDs43("1"), bigIDs43("2")
	for _, src := range []string{
		"sort_by(powertools_json(body).items, &sku)[0].sku",
		"max_by(powertools_json(body).items, &qty).sku",
		"map(&sku, powertools_json(body).items)",
		"[powertools_json(body).orderId, length(powertools_json(body).items)]",
		"min_by(detail.items, &qty).sku",
		"reverse(detail.items)[0].sku",
		"[detail.orderId, length(detail.items)]",
	} {
		accepted42b(t, false, src, a, b)
	}
	for _, src := range []string{
		"merge(powertools_json(body), {requestedAt: `null`})",
		"merge(detail, {metadata: `null`})",
		"sort_by(powertools_json(body).items, &sku)",
		"map(&[sku, qty], powertools_json(body).items)",
	} {
		accepted42b(t, true, src, a, b)
	}
}

// TestAttack43Held lists what h43 tried that held: realistic keys and
// fingerprints over API Gateway v2, SNS, EventBridge and the 42b events
// are accepted and tell events apart (invariant 2); hostile spellings of
// one key for every event in the class of 04bdd22 (an omitted argument's
// default, a built-in constant, nested map/sort_by/group_by, float
// limits, decoding through powertools_*) are refused or tell the events
// apart (invariant 1); and no refusal quotes an event value.
func TestAttack43Held(t *testing.T) {
	apigwV2 := func(n string) string {
		s := secret42b
		return `{"version": "2.0", "rawPath": "/orders/` + s + `o` + n + `", "headers": {"idempotency-key": "` + s + `k` + n + `", "x-tenant": "` + s + `t` + n + `"},
			"requestContext": {"http": {"method": "POST", "path": "/orders/` + s + `o` + n + `"}, "requestId": "` + s + `r` + n + `",
				"authorizer": {"jwt": {"claims": {"sub": "` + s + `u` + n + `", "cognito:username": "` + s + `n` + n + `"}}}},
			"queryStringParameters": {"n": "` + n + n + `"}, "isBase64Encoded": true, "body": "` + b64JSON43(`{"orderId": "`+s+`b`+n+`"}`) + `",
			"Records": [{"Sns": {"MessageId": "` + s + `m` + n + `", "Message": "{\"orderId\": \"` + s + `so` + n + `\"}",
				"MessageAttributes": {"Idempotency-Key": {"Type": "String", "Value": "` + s + `a` + n + `"}}}}]}`
	}
	for _, src := range []string{
		"powertools_json(powertools_base64(body)).orderId",
		"isBase64Encoded && powertools_json(powertools_base64(body)).orderId || powertools_json(body).orderId",
		"Records[0].Sns.MessageId", "powertools_json(Records[0].Sns.Message).orderId",
		`Records[0].Sns.MessageAttributes."Idempotency-Key".Value`, `[requestContext.authorizer.jwt.claims.sub, headers."idempotency-key"]`,
		`requestContext.authorizer.jwt.claims."cognito:username"`, "[requestContext.http.method, rawPath]",
		"join(' ', [requestContext.http.method, requestContext.http.path])", `headers."idempotency-key" || requestContext.requestId`,
		"length(Records) == `1` && Records[0].Sns.MessageId", `[headers."x-tenant" || 'public', headers."idempotency-key"]`,
		`join(':', [headers."x-tenant" || 'public', headers."idempotency-key"])`, "to_string(to_number(queryStringParameters.n))",
		"Records[*].Sns.MessageId", `Records[0].Sns | [MessageId, MessageAttributes."Idempotency-Key".Value]`,
		`lower(headers."idempotency-key")`, `trim(headers."idempotency-key")`, "headers.*", "values(requestContext.authorizer.jwt.claims)",
		"[requestContext.http.method == 'POST' && 'create' || 'update', rawPath]",
		"join('#', [requestContext.http.method == 'POST' && 'create' || 'update', rawPath])",
	} {
		accepted42b(t, false, src, apigwV2("1"), apigwV2("2"))
	}
	for _, src := range []string{
		"{amount: to_number(queryStringParameters.n)}", "[requestContext.http.method, rawPath, body]",
		"powertools_json(powertools_base64(body))",
	} {
		accepted42b(t, true, src, apigwV2("1"), apigwV2("2"))
	}
	e1, e2 := ebOrder43("1"), ebOrder43("2")
	for _, src := range []string{
		"[detail.orderId, to_string(detail.version || `1`)]", "join('-', [detail.orderId, detail.version || 'v0'])",
		"join('', ['inv-', pad_left(to_string(detail.orderNumber), `8`, '0')])",
		"replace(replace('{t}/{o}', '{t}', detail.customer), '{o}', detail.orderId)",
		"map(&join('#', [$.detail.customer, @]), detail.items[*].sku)", "detail.orderId && join('#', ['ORDER', detail.orderId])",
		"[detail.orderId, `1`]", "sort([detail.orderId, 'v1'])", "reverse(['v1', detail.orderId])", "to_array(detail.orderId)",
		"let $v = 'v2' in join('#', [$v, detail.orderId])", "let $p = ['ORDER', detail.orderId] in join('#', $p)",
		"join('#', map(&to_string(@), [detail.customer, detail.amount]))", "[detail.tenant || 'default', detail.orderId]",
		"detail.items[*].[sku, 'v1'] | [0]", "map(&[@, 'x'], [detail.orderId]) | [0]", "reverse(join('-', ['v1', detail.orderId]))",
	} {
		accepted42b(t, false, src, e1, e2)
	}
	for _, src := range []string{"merge({currency: 'EUR'}, detail)", "{o: detail.orderId, v: 'v2'}", "merge(detail, {v: 'v2'})"} {
		accepted42b(t, true, src, e1, e2)
	}

	// TestAttack43CarriedBigNumberIsKey's expressions, on its events
	// with the ids cut below 2^53, are accepted.
	small := func(n string) string {
		return strings.NewReplacer("87654321098765432", "", "23456789012345678", "").Replace(bigIDs43(n))
	}
	for _, src := range []string{
		"sort_by(powertools_json(body).items, &sku)[0].sku", "max_by(powertools_json(body).items, &qty).sku",
		"map(&sku, powertools_json(body).items)", "[powertools_json(body).orderId, length(powertools_json(body).items)]", "min_by(detail.items, &qty).sku",
		"reverse(detail.items)[0].sku", "[detail.orderId, length(detail.items)]", "powertools_json(body).items[*].sku",
	} {
		accepted42b(t, false, src, small("1"), small("2"))
	}
	for _, src := range []string{
		"merge(powertools_json(body), {requestedAt: `null`})", "merge(detail, {metadata: `null`})",
		"sort_by(powertools_json(body).items, &sku)", "map(&[sku, qty], powertools_json(body).items)", "powertools_json(body)",
	} {
		accepted42b(t, true, src, small("1"), small("2"))
	}
	accepted42b(t, false, "powertools_json(body).items[*].sku", bigIDs43("1"), bigIDs43("2"))
	accepted42b(t, true, "powertools_json(body)", bigIDs43("1"), bigIDs43("2"))

	// Hostile spellings that are refused or tell the events apart.
	a, b := base42b("1"), base42b("2")
	for _, src := range []string{
		// omitted arguments and built-in defaults
		"pad_left(id, `40`, '')", "replace(id, '', '')", "trim(id) || 'x'", "split(pk, '#', `1`)[1]",
		"split(id, 'x', `0`)[0]", "find_first(id, 'zz')", "avg(items[?qty > `100`].qty)", "max(items[?qty > `100`].qty)",
		"join(',', items[?qty > `100`].sku)", "sum(map(&qty, items[?qty > `100`]))", "to_string(map(&sku, items[?qty > `100`]))",
		"not_null(id == 'x', id)", "to_number('NaN')", "to_number(kind)", "to_string(to_number(kind))", "abs(`-0` * amount)",
		// numbers near float64's limits
		"amount * `1e308`", "to_string(amount * `1e308`)", "to_string(amount * `1e-300`)", "amount + `9007199254740992`",
		// literal text through decoding
		`powertools_json(join('', ['{"k":"v1","i":"', id, '"}'])).k`, "powertools_json(to_string({k: 'v1', i: id})).k",
		"keys(powertools_json(to_string({v1: id})))", "powertools_base64(join('', ['djEt', id]))[0:3]",
		// picks out of split mixes, nested map, sort_by, group_by
		"max(split(join('#', ['ORDER', id]), '#'))", "split(join('#', ['ORDER', id]), '#')[?@ == 'ORDER'] | [0]",
		"sort(split(join('#', ['zzz', id]), '#'))[-1]", "join('-', ['v1', id])[::-1]", "trim(join('', [id, 'v1']), id)",
		"not_null([join('-', ['v1', id])])[0][0:2]", "[[join('-', ['v1', id])]][0][0][0:2]",
		"items[*].join('-', ['v1', sku]) | [0][0:2]", "items[*].{k: 'v1', s: sku} | [0].k",
		"group_by(items, &'v1').v1[0].sku", "values(group_by(items, &sku))[0][0].sku", "map(&map(&'x', Records), [@])",
		"map(&sort_by(items, &'v1')[0].sku, [@])", "items(@)[?[0] == 'id'] | [0][1]", "from_items(items(@)).id",
		"let $a = id in replace($a, 'x', 'y')", "zip(['ORDER'], [id])[0]", "merge(@, {v: 'v2'}).id",
	} {
		noShared42b(t, false, src, a, b)
	}
	for _, src := range []string{"avg(items[?qty > `100`].qty)", "amount + `0.1`", "to_string(amount)", "amount * `1e308`"} {
		noShared42b(t, true, src, a, b)
	}
	// Exact numbers given as JSON numbers are refused when a function
	// takes them (the side TestAttack43ToNumberOfLongDecimalIsInexact
	// finds missing for strings).
	big1, big2 := `{"big": 9007199254740993, "s": "`+secret42b+`"}`, `{"big": 9007199254740992, "s": "`+secret42b+`"}`
	for _, src := range []string{"to_string(big)", "big - `1`", "big % `1000`"} {
		noShared42b(t, false, src, big1, big2)
	}

	// No refusal quotes an event value, and each names the expression.
	for _, tt := range []struct {
		src string
		fp  bool
	}{
		{"to_string(to_number(kind))", false}, {"to_string(amount * `1e308`)", false}, {"avg(items[?qty > `100`].qty)", false},
		{"join(',', items[?qty > `100`].sku)", false}, {"powertools_base64(join('', ['djEt', id]))", false},
		{"sum(map(&qty, items[?qty > `100`]))", false}, {"split(id, 'x', `-1`)", false}, {"pad_left(id, `-1`)", false},
		{"replace(id, 'x', 'y', `-1`)", false}, {"find_first(id, 'x', `1.5`)", false}, {"id[::0]", false},
		{"from_items([[id, pk, sk]])", false}, {"max_by(items, &sku == 'x')", false}, {"sort_by(Records, &[kind])", false},
		{"powertools_json(pk)", true}, {"to_string(amount * `1e308`)", true}, {"items[?qty > `100`]", true},
	} {
		var o outcome42b
		if tt.fp {
			o = payload42b(t, tt.src, a, b)
		} else {
			o = key42b(t, tt.src, a, b)
		}
		err := o.firstErr()
		switch {
		case err == nil:
			t.Errorf("%q (fingerprint %v): accepted; want a refusal", tt.src, tt.fp)
		case strings.Contains(err.Error(), secret42b):
			t.Errorf("%q: the refusal quotes an event value: %v", tt.src, err)
		case o.compileErr == nil && !strings.Contains(err.Error(), strconv.Quote(tt.src)):
			t.Errorf("%q (fingerprint %v): %v; want it to name the expression", tt.src, tt.fp, err)
		}
	}
}

// b64JSON43 is the standard base64 of s.
func b64JSON43(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
