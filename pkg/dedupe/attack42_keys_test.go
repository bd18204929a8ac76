package dedupe_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
)

// These tests hold the key rule of stop 41 (a key made of literals, or
// picked out of a mix of literals and fields, is refused) to both of its
// sides, as an adversary found them broken after it landed:
//
//   - a key computed from a field with literal parameters (split(pk,
//     '#')[1], replace(id, '-', '')) reads the event: it is a key, and
//     refusing it broke real users' keys on upgrade;
//   - a key that every event shares, however it is spelled (a map over a
//     literal body, a literal subject with the event as a parameter, the
//     shape of a container the expression built), is refused.

// event42 is a JSON event, checked to be valid JSON. It is given as its
// bytes, so that a number keeps its digits.
func event42(t *testing.T, src string) any {
	t.Helper()
	if !json.Valid([]byte(src)) {
		t.Fatalf("invalid JSON event %s", src)
	}
	return json.RawMessage(src)
}

// keys42 returns the keys expression src gives each event, or the first
// error; a compile error is returned as it is.
func keys42(t *testing.T, src string, evs ...any) ([]string, error) {
	t.Helper()
	e, err := dedupe.CompileExpr(src)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, ev := range evs {
		k, err := e.Key(ev)
		if err != nil {
			return nil, err
		}
		out = append(out, k)
	}
	return out, nil
}

// pair42 is two events that differ in every value a key could read.
type pair42 struct{ a, b string }

// TestAttack42ComputedFromFieldIsKey states that a key computed from a
// field, with literals only as a function's parameters (a separator, a
// pattern, a width), is a key: each event gets its own, and none is
// refused. split(pk, '#')[1] picks a part of what split computed from pk
// alone; the literal '#' is no part of the result.
func TestAttack42ComputedFromFieldIsKey(t *testing.T) {
	for _, tt := range []struct {
		key string
		ev  pair42
	}{
		{"split(pk, '#')[1]", pair42{`{"pk": "TENANT#a1"}`, `{"pk": "TENANT#b2"}`}},
		{"split(pk, '#')[-1]", pair42{`{"pk": "T#x#a1"}`, `{"pk": "T#x#b2"}`}},
		{"split(Records[0].s3.object.key, '/')[-1]", pair42{
			`{"Records": [{"s3": {"object": {"key": "in/2026/a.csv"}}}]}`,
			`{"Records": [{"s3": {"object": {"key": "in/2026/b.csv"}}}]}`}},
		{"replace(pk, '#', '-')[0:12]", pair42{`{"pk": "ORDER#0000a1x"}`, `{"pk": "ORDER#0000b1x"}`}},
		{"powertools_json(trim(body, ' ')).order.id", pair42{`{"body": " {\"order\": {\"id\": \"o-1\"}} "}`, `{"body": " {\"order\": {\"id\": \"o-2\"}} "}`}},
		{"max_by(Records, &replace(messageId, '-', '')).messageId", pair42{
			`{"Records": [{"messageId": "m-1"}, {"messageId": "m-2"}]}`,
			`{"Records": [{"messageId": "m-3"}, {"messageId": "m-4"}]}`}},
		{"pad_left(id, `8`, '0')", pair42{`{"id": "17"}`, `{"id": "18"}`}},
		// padding the event chose is the event's text, not a literal's
		{"pad_left(id, `40`, fill)[0:8]", pair42{`{"id": "17", "fill": "#"}`, `{"id": "18", "fill": "*"}`}},
		{"lower(trim(email))[0:5]", pair42{`{"email": " Ann@x "}`, `{"email": " Bob@x "}`}},
		{"find_first(pk, '#')", pair42{`{"pk": "a#b"}`, `{"pk": "ab#c"}`}},
		{"split(join('/', [tenant, id]), '/')[1]", pair42{`{"tenant": "t", "id": "1"}`, `{"tenant": "t", "id": "2"}`}},
		{"zip(split(a, ','), split(b, ','))[0][1]", pair42{`{"a": "x,y", "b": "1,2"}`, `{"a": "x,y", "b": "3,4"}`}},
		{"items(powertools_json(body))[0][1]", pair42{`{"body": "{\"id\": \"1\"}"}`, `{"body": "{\"id\": \"2\"}"}`}},
	} {
		got, err := keys42(t, tt.key, event42(t, tt.ev.a), event42(t, tt.ev.b))
		if err != nil {
			t.Errorf("Key %q: %v; want a key for each event", tt.key, err)
			continue
		}
		if got[0] == got[1] {
			t.Errorf("Key %q: two events share the key %q", tt.key, got[0])
		}
	}
}

// TestAttack42SortKeyDoesNotTaintElements states that the expression
// that orders or chooses the elements of a list (sort_by, max_by,
// min_by) gives the result none of its literals: the elements are the
// list's, picked from the event.
func TestAttack42SortKeyDoesNotTaintElements(t *testing.T) {
	recs := pair42{
		`{"Records": [{"messageId": "m1", "a": "1", "b": "x"}, {"messageId": "m2", "a": "2", "b": "y"}]}`,
		`{"Records": [{"messageId": "m3", "a": "1", "b": "x"}, {"messageId": "m4", "a": "2", "b": "y"}]}`}
	for _, key := range []string{
		"max_by(Records, &join('', [a, '-', b])).messageId",
		"min_by(Records, &join('-', [a, 'v1'])).messageId",
		"sort_by(Records, &join('', ['k', a]))[0].messageId",
		"sort_by(Records, &to_string(`1`))[-1].messageId",
		"max_by(Records, &to_number(join('', ['1', a]))).messageId",
	} {
		got, err := keys42(t, key, event42(t, recs.a), event42(t, recs.b))
		if err != nil {
			t.Errorf("Key %q: %v; want a key for each event", key, err)
			continue
		}
		if got[0] == got[1] {
			t.Errorf("Key %q: two events share the key %q", key, got[0])
		}
	}
}

// TestAttack42SharedKeysRefused states invariant 1 for the spellings the
// adversary found: two events that differ in every field get two keys,
// or at least one of them is refused with ErrNoKey (at construction, or
// per event). Each of these keys is the same for every event: a map
// whose body is a literal, a part that takes one of a few values picked
// beside a field, a literal picked from a projection whose elements mix
// literals and fields, a literal subject with the event only as a
// parameter, the shape of a container the expression built, a literal
// list ordered by the event.
func TestAttack42SharedKeysRefused(t *testing.T) {
	evs := pair42{
		`{"pk": "p1", "sk": "s1", "id": "i1", "amount": 3, "Records": [{"messageId": "m1", "kind": "a"}, {"messageId": "m2", "kind": "b"}]}`,
		`{"pk": "p2", "sk": "s2", "id": "i2", "amount": 4, "Records": [{"messageId": "m3", "kind": "a"}, {"messageId": "m4", "kind": "b"}]}`}
	for _, key := range []string{
		// a map over a literal body
		"map(&'messageId', Records)",
		"let $f = 'messageId' in map(&$f, Records)",
		"map(&'v1', Records)[0]",
		"map(&to_string(kind == 'a'), Records)",
		"map(&(kind == 'a' && 'v1' || messageId), Records)[0]",
		"keys(group_by(Records, &'v1'))",
		"keys(group_by(Records, &to_string(kind == 'z')))",
		"values(group_by(Records, &'v1'))[0][0].messageId",
		// a few-valued part picked beside a field
		"[to_string(amount > `5`), id][0]",
		"{t: to_string(!id), i: id}.t",
		"merge({t: to_string(!id)}, @).t",
		// a per-element mix in a projection, then a pick
		"Records[*].not_null(kind == 'a' && 'v1' || messageId) | [0]",
		"Records[?kind != 'z'].not_null(kind == 'a' && 'v1' || messageId) | [0]",
		"Records[*].[kind == 'a' && 'v1' || messageId][] | [0]",
		"[['v1', pk]][*][0]",
		"max(Records[*].not_null(kind == 'a' && 'zz' || messageId))",
		"Records[*].not_null(kind == 'a' && to_string(!kind) || messageId) | [0]",
		// a literal subject, the event only a parameter
		"join(pk, ['v1'])",
		"replace('v1', pk, 'x')",
		"split('a#b', pk)[0]",
		"trim('v1', pk)",
		"pad_right('v1', `2`, pk)",
		"pad_left('v1', length(pk))",
		"find_first('v1v1', pk)",
		// the shape of a container the expression built
		"keys({k: pk})",
		"length([pk, sk])",
		"to_string(length([pk, sk]))",
		"keys(merge({a: pk}, {b: sk}))",
		"items({k: pk})[0][0]",
		"length(to_array(pk))",
		"to_string(length({a: pk, b: sk}))",
		"length(values({a: pk, b: sk}))",
		"length(sort([pk, sk]))",
		"length(map(&@, [pk, sk]))",
		"keys({k: pk})[0]",
		// literal text picked out of a part of a list, a flattened mix, a
		// merge that kept a literal where it replaced the field beside it
		"[join('', ['v1', pk]), sk][0][0:2]",
		"[['v1', pk], [sk]][] | [0]",
		"values(merge({a: pk, b: 'x'}, {a: 'y'}))",
		// a literal list ordered or chosen by the event
		"sort_by(['v1', 'v2'], &to_string($.amount))[0]",
		"max_by([{v: 'v1'}, {v: 'v2'}], &$.pk).v",
		"min_by(['v1', 'v2'], &$.pk)",
		"reverse(sort_by(['v1', 'v2'], &$.pk))",
	} {
		got, err := keys42(t, key, event42(t, evs.a), event42(t, evs.b))
		if err != nil {
			if strings.Contains(err.Error(), "compile") {
				continue // refused at construction
			}
			if !errors.Is(err, dedupe.ErrNoKey) {
				t.Errorf("Key %q: %v; want ErrNoKey or a key for each event", key, err)
			}
			continue
		}
		if got[0] == got[1] {
			t.Errorf("Key %q: two events that differ in every field share the key %q: the second would be answered the first's result", key, got[0])
		}
	}
}

// TestAttack42FingerprintOfLiteralBodyRefused states invariant 1's
// fingerprint side: two requests that differ in what the fingerprint
// should read never share a fingerprint (else a reused key with another
// request is replayed, not refused with 422). A map whose body is a
// literal reads none of the items.
func TestAttack42FingerprintOfLiteralBodyRefused(t *testing.T) {
	a := event42(t, `{"items": [{"qty": 1}, {"qty": 2}]}`)
	b := event42(t, `{"items": [{"qty": 5}, {"qty": 9}]}`)
	for _, src := range []string{"map(&'qty', items)", "let $q = 'qty' in map(&$q, items)", "keys({q: items[0].qty})"} {
		e, err := dedupe.CompileExpr(src)
		if err != nil {
			continue
		}
		pa, erra := e.Payload(a)
		pb, errb := e.Payload(b)
		if erra == nil && errb == nil && string(pa) == string(pb) {
			t.Errorf("Fingerprint %q: two requests that differ in every quantity share the payload %s", src, pa)
		}
		for _, err := range []error{erra, errb} {
			if err != nil && !errors.Is(err, dedupe.ErrNoFingerprint) {
				t.Errorf("Fingerprint %q: %v; want ErrNoFingerprint", src, err)
			}
		}
	}
	for _, src := range []string{"map(&qty, items)", "map(&to_string(qty), items)", "items[*].qty", "values({q: items[0].qty})"} {
		e := dedupe.MustCompileExpr(src)
		pa, erra := e.Payload(a)
		pb, errb := e.Payload(b)
		if erra != nil || errb != nil || string(pa) == string(pb) {
			t.Errorf("Fingerprint %q: %s, %v / %s, %v; want two payloads", src, pa, erra, pb, errb)
		}
	}
}

// TestAttack42UserKeysHeld states the accepting side for keys users
// write (the Powertools docs', AWS events', the README's): each is a key,
// and two events that differ in what it reads get two keys.
func TestAttack42UserKeysHeld(t *testing.T) {
	a := event42(t, `{"pk": "T#1", "tenant": "t1", "id": "o1", "amount": 3, "body": "{\"orderId\": \"o1\", \"user\": {\"id\": \"u1\"}}",
		"headers": {"idempotency-key": "k1"}, "requestContext": {"requestId": "r1"}, "detail": {"id": "d1", "customer": "c1"},
		"items": [{"n": 1, "id": "i1"}, {"n": 2, "id": "i2"}], "Records": [{"messageId": "m1", "body": "{\"id\": \"b1\"}"}]}`)
	b := event42(t, `{"pk": "T#2", "tenant": "t1", "id": "o2", "amount": 3, "body": "{\"orderId\": \"o2\", \"user\": {\"id\": \"u2\"}}",
		"headers": {"idempotency-key": "k2"}, "requestContext": {"requestId": "r2"}, "detail": {"id": "d2", "customer": "c2"},
		"items": [{"n": 1, "id": "i3"}, {"n": 2, "id": "i4"}], "Records": [{"messageId": "m2", "body": "{\"id\": \"b2\"}"}]}`)
	for _, key := range []string{
		"id", "pk", "[tenant, id]", "[tenant, 'v2', id]", "join('#', [tenant, id])", "join('', ['order-', id])",
		"powertools_json(body).orderId", "powertools_json(body).[orderId, user.id]", `headers."idempotency-key"`,
		"requestContext.requestId", "detail.id", "[detail.customer, detail.id]", "Records[0].messageId",
		"Records[*].messageId", "map(&messageId, Records)", "sort_by(Records, &messageId)[0].messageId",
		"max_by(items, &n).id", "min_by(items, &n).id", "items[?n > `1`].id", "items[?n > `1`].id | [0]",
		"split(pk, '#')[1]", "lower(id)", "upper(id)", "to_string(id)", "values({t: tenant, i: id})",
		"powertools_json(Records[0].body).id", "not_null(missing, id)", "id || pk",
		"merge({id: 'none'}, @).id", "merge({id: to_string(nope)}, @).id", "[id, nope || 'none']",
		"replace('orders/{id}', '{id}', id)", "items[?id != null].id",
	} {
		got, err := keys42(t, key, a, b)
		if err != nil {
			t.Errorf("Key %q: %v; want a key for each event", key, err)
			continue
		}
		if got[0] == got[1] {
			t.Errorf("Key %q: two events share the key %q", key, got[0])
		}
	}
}

// TestAttack42ChoiceByMissingOrInexactRefused states that an element
// chosen or ordered by a value computed from a missing field, or from a
// number float64 cannot hold exactly, is refused as a key (it may be
// chosen wrongly, or for every event without the field), and a map over
// a list computed from a missing value keeps it missing: as a filter's
// and a projection's elements are.
func TestAttack42ChoiceByMissingOrInexactRefused(t *testing.T) {
	for _, tt := range []struct{ key, ev, want string }{
		{"max_by(Records, &to_string(n)).messageId", `{"Records": [{"messageId": "m1", "n": "1"}, {"messageId": "m2"}]}`, "missing value"},
		{"sort_by(Records, &to_string(n))[0].messageId", `{"Records": [{"messageId": "m1", "n": "1"}, {"messageId": "m2"}]}`, "missing value"},
		{"max_by(Records, &n).messageId", `{"Records": [{"messageId": "m1", "n": 9007199254740993}, {"messageId": "m2", "n": 9007199254740992}]}`, "cannot hold exactly"},
		{"min_by(Records, &n).messageId", `{"Records": [{"messageId": "m1", "n": 9007199254740993}, {"messageId": "m2", "n": 9007199254740992}]}`, "cannot hold exactly"},
		{"max_by(Records, &$.n).messageId", `{"n": 9007199254740993, "Records": [{"messageId": "m1"}, {"messageId": "m2"}]}`, "cannot hold exactly"},
		{"map(&to_string(@), [n])", `{"n": 9007199254740993}`, "cannot hold exactly"},
		{"map(&id, items[*].sub)", `{"items": [{"sub": {"id": "a"}}, {"x": 1}]}`, "missing value"},
	} {
		_, err := keys42(t, tt.key, event42(t, tt.ev))
		if !errors.Is(err, dedupe.ErrNoKey) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Key %q: %v; want ErrNoKey saying %q", tt.key, err, tt.want)
		}
	}
	for _, src := range []string{"sort_by(items, &to_string(n))", "map(&@, to_array(to_string(amount)))"} {
		_, err := dedupe.MustCompileExpr(src).Payload(event42(t, `{"items": [{"n": 1, "q": 1}, {"q": 2}]}`))
		if !errors.Is(err, dedupe.ErrNoFingerprint) {
			t.Errorf("Fingerprint %q: %v; want ErrNoFingerprint (computed from a missing value)", src, err)
		}
	}
}
