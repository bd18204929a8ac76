package dedupe_test

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
)

// These tests attack the provenance rules of stop 42 (635dc24) from both
// sides, as a second adversary (h42b) found them:
//
//   - invariant 1 (no shared key): two events that differ in every value
//     the expression reads never get one key from Key(), nor one payload
//     from Payload(), unless one of them is refused (ErrNoKey,
//     ErrNoFingerprint) or the expression does not compile;
//   - invariant 2 (no false refusal): keys and fingerprints that users
//     write over AWS events are accepted and tell two events apart.
//
// Every value of the events below holds secret42b, so that a test can
// tell whether an error echoes one.

// secret42b marks every value of the events below.
const secret42b = "SECRET42"

// base42b is an event whose every value differs between n = "1" and
// n = "2" (the Records' kinds, read only by filters, are the same).
func base42b(n string) string {
	s := secret42b
	return `{"pk": "P#` + s + `p` + n + `", "sk": "` + s + `s` + n + `", "id": "` + s + `i` + n + `", "amount": ` + n + `0, "kind": "` + s + `k` + n + `",
		"items": [{"qty": ` + n + `1, "sku": "` + s + `x` + n + `"}, {"qty": ` + n + `2, "sku": "` + s + `y` + n + `"}],
		"Records": [{"messageId": "` + s + `m` + n + `1", "kind": "a"}, {"messageId": "` + s + `m` + n + `2", "kind": "b"}]}`
}

// outcome42b is what an expression gives two events: a compile error, a
// refusal of either, or two selections.
type outcome42b struct {
	compileErr error
	errs       [2]error
	got        [2]string
}

// shared reports whether both events were accepted with one selection.
func (o outcome42b) shared() bool {
	return o.compileErr == nil && o.errs[0] == nil && o.errs[1] == nil && o.got[0] == o.got[1]
}

// distinct reports whether both events were accepted with two selections.
func (o outcome42b) distinct() bool {
	return o.compileErr == nil && o.errs[0] == nil && o.errs[1] == nil && o.got[0] != o.got[1]
}

// firstErr returns the first error of o.
func (o outcome42b) firstErr() error {
	if o.compileErr != nil {
		return o.compileErr
	}
	if o.errs[0] != nil {
		return o.errs[0]
	}
	return o.errs[1]
}

// key42b evaluates src as a Key of events a and b.
func key42b(t *testing.T, src, a, b string) outcome42b {
	t.Helper()
	var o outcome42b
	e, err := dedupe.CompileExpr(src)
	if err != nil {
		o.compileErr = err
		return o
	}
	for i, ev := range []string{a, b} {
		o.got[i], o.errs[i] = e.Key(event42(t, ev))
	}
	return o
}

// payload42b evaluates src as a Fingerprint of events a and b.
func payload42b(t *testing.T, src, a, b string) outcome42b {
	t.Helper()
	var o outcome42b
	e, err := dedupe.CompileExpr(src)
	if err != nil {
		o.compileErr = err
		return o
	}
	for i, ev := range []string{a, b} {
		p, err := e.Payload(event42(t, ev))
		o.got[i], o.errs[i] = string(p), err
	}
	return o
}

// noShared42b fails when src gives the two events one key (or, for a
// fingerprint, one payload), and when a refusal is not ErrNoKey or
// ErrNoFingerprint.
func noShared42b(t *testing.T, fingerprint bool, src, a, b string) {
	t.Helper()
	what, sentinel, o := "Key", dedupe.ErrNoKey, outcome42b{}
	if fingerprint {
		what, sentinel, o = "Fingerprint", dedupe.ErrNoFingerprint, payload42b(t, src, a, b)
	} else {
		o = key42b(t, src, a, b)
	}
	if o.compileErr != nil {
		return // refused at construction: nothing is shared
	}
	for i, err := range o.errs {
		if err != nil && !errors.Is(err, sentinel) {
			t.Errorf("%s %q: event %d: %v; want %v or a selection", what, src, i+1, err, sentinel)
		}
	}
	if o.shared() {
		t.Errorf("%s %q: two events that differ in every value it reads share %q: the second would be answered the first's result", what, src, o.got[0])
	}
}

// TestAttack42bDuplicateHashKeyLeaks states invariant 1 for a
// multi-select hash that names one key twice ({a: id, a: 'v1'}): the
// later literal replaces the field, so the object holds literals alone,
// yet its parts were counted before the replacement (a mix, not a
// literal), and values(), to_string() and the fingerprint of it are
// accepted: every event shares them. Hostile only (no user names a key
// twice). Fix: refuse a repeated key at construction (analyze), or count
// the parts of the hash after duplicates are resolved.
func TestAttack42bDuplicateHashKeyLeaks(t *testing.T) {
	a, b := base42b("1"), base42b("2")
	for _, src := range []string{
		"values({a: id, a: 'v1'})",
		"to_string({a: id, a: 'v1'})",
		"join('-', values({a: pk, b: sk, a: 'x', b: 'y'}))",
		"{a: id, a: 'v1'} | values(@)",
	} {
		noShared42b(t, false, src, a, b)
	}
	for _, src := range []string{"{a: amount, a: 'x'}", "{a: amount, b: id, a: 'x', b: 'y'}"} {
		noShared42b(t, true, src, a, b)
	}
}

// TestAttack42bOverriddenPartLeaks states invariant 1 for merge and
// from_items, whose later arguments (pairs) replace earlier ones: a
// literal that replaces every field leaves an object of literals alone,
// but merge and from_items count all their inputs (a mix), so values(),
// to_string() and a fingerprint of the result are accepted and shared.
// from_items([[id, 'v1']]) likewise makes the event only a key name, and
// values() of it is the literal. Hostile only. Fix: give merge's result
// the kinds of the parts that survive (for each key, the last argument
// holding it), and from_items' values the kinds of the pairs' values
// (its keys those of the pairs' names), rather than of every input.
func TestAttack42bOverriddenPartLeaks(t *testing.T) {
	a, b := base42b("1"), base42b("2")
	for _, src := range []string{
		"values(merge({k: id}, {k: 'v1'}))",
		"to_string(merge({k: id}, {k: 'v1'}))",
		"values(merge(@, {pk: 'a', sk: 'b', id: 'c', amount: 'd', kind: 'e', items: 'f', Records: 'g'}))",
		"values(from_items([[id, 'v1']]))",
		"values(from_items([['k', id], ['k', 'v1']]))",
		"[id, 'v1'] | from_items([@]) | values(@)",
	} {
		noShared42b(t, false, src, a, b)
	}
	for _, src := range []string{
		"merge({a: amount}, {a: 'x'})",
		"merge(@, {pk: 'a', sk: 'b', id: 'c', amount: 'd', kind: 'e', items: 'f', Records: 'g'})",
		"values(from_items([[id, 'v1']]))",
	} {
		noShared42b(t, true, src, a, b)
	}
}

// TestAttack42bShapeThroughMapLeaks states invariant 1 for the shape of
// a list or object the expression built ([a, b], {k: a}), whose length
// and keys are the expression's: stop 42 refuses length([pk, sk]) and
// keys({k: pk}), but map loses the shape twice: its result takes only
// the list's shape (not the body's), and its expression reference sees
// each element without the shape it had. keys(map(&{a: x}, list)[0]),
// length(map(&[x, y], list)[0]), map(&length(@), [[pk, sk]]) are one key
// for every event. Hostile only. Fix: carry the body's shape to what is
// picked out of map's result (a separate flag for the elements' shape,
// which picked() turns into shaped), and pass elem.shaped into the
// expression reference's input.
func TestAttack42bShapeThroughMapLeaks(t *testing.T) {
	a, b := base42b("1"), base42b("2")
	for _, src := range []string{
		"keys(map(&{a: messageId}, Records)[0])",
		"length(map(&[messageId, kind], Records)[0])",
		"map(&keys(@), [{a: pk}])[0]",
		"map(&length(@), [[pk, sk]])",
		"map(&to_string(length(@)), Records[*].[messageId, kind])",
	} {
		noShared42b(t, false, src, a, b)
	}
	noShared42b(t, true, "map(&length(@), [[pk, sk]])", a, b)
}

// TestAttack42bLiteralTextSliceLeaks states invariant 1 for a slice of a
// string whose head or tail is literal text the expression put there:
// padding (pad_left(id, `40`, '0')[0:8] is "00000000" for every id of
// fewer than 32 characters) or the JSON syntax of to_string of a built
// container (to_string({a: id})[0:4] is `{"a"`). A slice of
// join('-', ['v1', id]) is refused for that reason (the string is a mix);
// these are not. Hostile only. Fix: mark a string that pad_left or
// pad_right padded with a literal, and to_string of a list or object, as
// holding literal text (a mix for what is sliced or indexed out of it),
// as join's result is.
func TestAttack42bLiteralTextSliceLeaks(t *testing.T) {
	a, b := base42b("1"), base42b("2")
	for _, src := range []string{
		"pad_left(id, `40`, '0')[0:8]",
		"pad_right(id, `40`, '-')[-8:]",
		// pad's own pad character, a space, is literal text too
		"pad_left(id, `40`)[0:8]",
		"pad_right(id, `40`)[-8:]",
		"to_string({a: id})[0:4]",
		"to_string([id])[0:1]",
		"to_string({alpha: id, beta: pk})[0:8]",
	} {
		noShared42b(t, false, src, a, b)
	}
	noShared42b(t, true, "to_string({a: amount})[0:4]", a, b)
}

// TestAttack42bAnnihilatingArithmeticLeaks states invariant 1 for
// arithmetic whose result does not depend on the event: a product with a
// literal zero (amount * `0`), and zero divided by the event (`0` /
// amount, `0` // amount, `0` % amount). They count as read from the
// event, so every event gets the key 0 (or 5 for `5` + amount * `0`).
// Hostile only. Fix: in arithmetic, a product one of whose operands is a
// literal zero, and a quotient or remainder whose dividend is a literal
// zero, is made of literals alone (konst).
func TestAttack42bAnnihilatingArithmeticLeaks(t *testing.T) {
	a, b := base42b("1"), base42b("2")
	for _, src := range []string{
		"amount * `0`",
		"`0` * amount",
		"`0` / amount",
		"`0` // amount",
		"`0` % amount",
		"abs(amount) * `0`",
		"to_number('5') + amount * `0`",
		"to_string(length(id) * `0`)",
		"[amount * `0`, `0` * items[0].qty]",
	} {
		noShared42b(t, false, src, a, b)
	}
	noShared42b(t, true, "amount * `0`", a, b)
}

// TestAttack42bAlwaysEmptyFilterLeaks states invariant 1 for a filter
// whose condition is a literal false: it chooses no element of any
// event, yet its empty result counts as read from the event, and what is
// computed from it (to_string gives "[]", sum and length 0) is accepted
// and shared. Hostile only. Fix: a filter projection that collected
// nothing, each of whose conditions was made of literals alone, selects
// a literal (konst).
func TestAttack42bAlwaysEmptyFilterLeaks(t *testing.T) {
	a, b := base42b("1"), base42b("2")
	for _, src := range []string{
		"to_string(Records[?`false`])",
		"sum(items[?`false`].qty)",
		"length(items[?`false`])",
		"to_string(items[?'' == 'x'].sku)",
	} {
		noShared42b(t, false, src, a, b)
	}
	noShared42b(t, true, "length(items[?`false`])", a, b)
}

// ddb42b is a DynamoDB stream event of two records (an INSERT and a
// MODIFY), every value ending in n.
func ddb42b(n string) string {
	rec := func(m, name string) map[string]any {
		return map[string]any{"eventID": secret42b + "ev" + m, "eventName": name, "eventSource": "aws:dynamodb",
			"dynamodb": map[string]any{
				"Keys":           map[string]any{"pk": map[string]any{"S": "USER#" + secret42b + "p" + m}, "sk": map[string]any{"S": secret42b + "s" + m}},
				"NewImage":       map[string]any{"id": map[string]any{"S": secret42b + "i" + m}, "version": map[string]any{"N": m}},
				"SequenceNumber": "11" + m, "SizeBytes": 26, "StreamViewType": "NEW_AND_OLD_IMAGES"},
			"eventSourceARN": "arn:aws:dynamodb:us-east-1:1:table/T/stream/2026"}
	}
	return mustJSON42b(map[string]any{"Records": []any{rec(n+"1", "INSERT"), rec(n+"2", "MODIFY")}})
}

// eb42b is an EventBridge event, every value ending in n.
func eb42b(n string) string {
	return mustJSON42b(map[string]any{"version": "0", "id": secret42b + "e" + n, "detail-type": "OrderPlaced", "source": "com.example." + secret42b + n,
		"time": "2026-01-01T00:00:0" + n + "Z", "region": "us-east-1", "resources": []any{},
		"detail": map[string]any{"orderId": secret42b + "o" + n, "customer": secret42b + "c" + n, "amount": json.Number(n + "0"),
			"metadata": map[string]any{"idempotencyKey": secret42b + "k" + n, "sentAt": "2026-01-0" + n},
			"items":    []any{map[string]any{"sku": secret42b + "s" + n, "qty": json.Number(n)}}}})
}

// sqs42b is an SQS event of two messages, every value ending in n.
func sqs42b(n string) string {
	rec := func(m string) map[string]any {
		return map[string]any{"messageId": secret42b + "m" + m, "receiptHandle": "h",
			"body":              mustJSON42b(map[string]any{"id": secret42b + "b" + m, "Message": mustJSON42b(map[string]any{"orderId": secret42b + "o" + m})}),
			"attributes":        map[string]any{"ApproximateReceiveCount": m, "SentTimestamp": "15232320000" + m, "MessageGroupId": secret42b + "g" + m, "MessageDeduplicationId": secret42b + "d" + m},
			"messageAttributes": map[string]any{"idempotencyKey": map[string]any{"stringValue": secret42b + "k" + m, "dataType": "String"}},
			"md5OfBody":         secret42b + "md" + m, "eventSource": "aws:sqs", "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:" + secret42b + "q" + m}
	}
	return mustJSON42b(map[string]any{"Records": []any{rec(n + "1"), rec(n + "2")}})
}

// apigw42b is an API Gateway (REST) request, every value ending in n.
func apigw42b(n string) string {
	body := mustJSON42b(map[string]any{"orderId": secret42b + "o" + n, "user": map[string]any{"id": secret42b + "u" + n}, "product_id": secret42b + "p" + n,
		"amount": json.Number(n + "0"), "items": []any{map[string]any{"sku": secret42b + "s" + n, "qty": 1}, map[string]any{"sku": secret42b + "t" + n, "qty": 2}},
		"tags": []any{"a=" + secret42b + "v" + n, "b=" + secret42b + "w" + n}})
	return mustJSON42b(map[string]any{"resource": "/orders/{orderId}", "path": "/orders/" + secret42b + "o" + n, "httpMethod": "POST",
		"headers":        map[string]any{"Idempotency-Key": " " + secret42b + "k" + n + " ", "Host": secret42b + "h" + n + ".example.com", "X-Tenant": secret42b + "T" + n},
		"pathParameters": map[string]any{"orderId": secret42b + "o" + n},
		"requestContext": map[string]any{"requestId": secret42b + "r" + n, "authorizer": map[string]any{"claims": map[string]any{"sub": secret42b + "u" + n}}},
		"body":           body, "isBase64Encoded": false})
}

// s3k42b is an S3 and a Kinesis and a CloudWatch Logs event in one, every
// value ending in n.
func s3k42b(n string) string {
	var gz bytes.Buffer
	w := gzip.NewWriter(&gz)
	_, _ = w.Write([]byte(mustJSON42b(map[string]any{"logGroup": secret42b + "g" + n, "logEvents": []any{map[string]any{"id": secret42b + "le" + n}}})))
	_ = w.Close()
	return mustJSON42b(map[string]any{
		"Records": []any{map[string]any{"eventName": "ObjectCreated:Put", "eventID": "shardId-000:" + secret42b + "e" + n,
			"s3": map[string]any{"bucket": map[string]any{"name": secret42b + "bk" + n},
				"object": map[string]any{"key": "in/2026/" + secret42b + "o" + n + ".csv", "versionId": secret42b + "v" + n}},
			"kinesis": map[string]any{"partitionKey": secret42b + "pk" + n, "sequenceNumber": "4959" + n,
				"data": base64.StdEncoding.EncodeToString([]byte(mustJSON42b(map[string]any{"id": secret42b + "d" + n})))}}},
		"awslogs": map[string]any{"data": base64.StdEncoding.EncodeToString(gz.Bytes())}})
}

// mustJSON42b encodes v.
func mustJSON42b(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// accepted42b fails unless src, as a Key (or a Fingerprint), accepts
// both events and tells them apart.
func accepted42b(t *testing.T, fingerprint bool, src, a, b string) {
	t.Helper()
	what, o := "Key", outcome42b{}
	if fingerprint {
		what, o = "Fingerprint", payload42b(t, src, a, b)
	} else {
		o = key42b(t, src, a, b)
	}
	if !o.distinct() {
		if err := o.firstErr(); err != nil {
			t.Errorf("%s %q: %v; want a selection for each event", what, src, err)
		} else {
			t.Errorf("%s %q: two events share %q", what, src, o.got[0])
		}
	}
}

// TestAttack42bNotNullFilterIsKey states invariant 2 for the usual
// JMESPath test that a field is present, x != null (or `null`): a
// literal null counts as a missing value, so a filter that keeps the
// records that have a NewImage (DynamoDB streams: skip REMOVE), or a
// guard x != null && x, is refused with "computed its key from a missing
// value", although it chose the elements because the field is present.
// ([?x] and [?not_null(x)], which mean the same, are keys.) A user
// would write it. Fix: a literal null is not a missing value; a
// comparison is missing only when an operand read from the event is null
// (x == null true for an event without x stays refused).
func TestAttack42bNotNullFilterIsKey(t *testing.T) {
	d1, d2 := ddb42b("1"), ddb42b("2")
	for _, src := range []string{
		"Records[?dynamodb.NewImage != null].eventID",
		"Records[?dynamodb.NewImage != `null`].eventID | [0]",
		"Records[?eventName == 'INSERT' && dynamodb.NewImage != null].dynamodb.Keys.pk.S",
		"Records[0].dynamodb.NewImage.id.S != null && Records[0].dynamodb.NewImage.id.S",
		"Records[?dynamodb.Keys.sk != null].[dynamodb.Keys.pk.S, dynamodb.Keys.sk.S] | [0]",
	} {
		accepted42b(t, false, src, d1, d2)
	}
	e1, e2 := eb42b("1"), eb42b("2")
	accepted42b(t, false, "detail.items[?sku != null].sku", e1, e2)
	accepted42b(t, true, "detail.items[?sku != null]", e1, e2)
	accepted42b(t, true, "Records[?dynamodb.NewImage != null].dynamodb.NewImage", d1, d2)
}

// TestAttack42bElementOfComposedListIsKey states invariant 2 for a list
// whose every element is a string composed of a literal and a field
// (Records[*].join(':', ['sqs', messageId])): the join carries the list
// argument's mix into the string, so the list counts as a mix, and an
// element picked out of it ([0], max, sort then [0]) is refused as a
// literal, though each element holds its field. Plausible for a user
// (a prefixed id per record, then the first or the largest). Fix: a
// string computed from a mix is not a container; let a list or object
// count as a mix only from its own parts' kinds (and from parts that are
// themselves mixed containers), keeping the string's literal text for
// what is sliced out of the string itself.
func TestAttack42bElementOfComposedListIsKey(t *testing.T) {
	q1, q2 := sqs42b("1"), sqs42b("2")
	for _, src := range []string{
		"Records[*].join(':', ['sqs', messageId]) | [0]",
		"map(&join(':', ['sqs', messageId]), Records) | [0]",
		"max(map(&join('#', ['MSG', messageId]), Records))",
		"sort(Records[*].join('#', ['MSG', messageId])) | [-1]",
		"[join('#', ['ORDER', Records[0].messageId]), Records[0].md5OfBody][0]",
	} {
		accepted42b(t, false, src, q1, q2)
	}
}

// TestAttack42bSliceOfComposedKeyIsRefusedLoudly states the
// conservative side of literal text: dedupe does not track where in a
// computed string the literal text lies (join('#', ['ORDER', id]) holds
// "ORDER#" before the field), so a slice or split part of it is refused
// as a pick out of a mix, per event with ErrNoKey saying why, never
// accepted as the literal it might be (pad_left(id, `40`, '0')[0:8] is
// "00000000" for every event: TestAttack42bLiteralTextSliceLeaks). A key
// needs no bounding: the store key bounds a long one itself (boundKey).
// Select the composed key whole, or the field.
func TestAttack42bSliceOfComposedKeyIsRefusedLoudly(t *testing.T) {
	g1 := apigw42b("1")
	for _, src := range []string{
		"join('#', ['ORDER', pathParameters.orderId])[0:64]",
		"upper(join('-', ['order', pathParameters.orderId]))[0:40]",
		`split(join('#', ['T', headers."X-Tenant"]), '#')[1]`,
	} {
		o := key42b(t, src, g1, g1)
		err := o.firstErr()
		if o.compileErr != nil || !errors.Is(err, dedupe.ErrNoKey) || !strings.Contains(err.Error(), "mixes literals with fields") {
			t.Errorf("Key %q: compile %v, %v; want ErrNoKey naming the mix", src, o.compileErr, err)
		}
	}
	for _, src := range []string{
		"join('#', ['ORDER', pathParameters.orderId])",
		"upper(join('-', ['order', pathParameters.orderId]))",
	} {
		accepted42b(t, false, src, g1, apigw42b("2"))
	}
}

// TestAttack42bTemplateReplaceIsKey states invariant 2 for a literal
// template filled with a field: replace('orders/{id}', '{id}', id) is
// the field's text inside a literal, and join(id, ['a', 'b']) puts the
// field between two literals; stop 42's rule takes only the first
// argument of replace (the second of join) as the result's text, so
// both are refused as "comparisons and literals alone". replace's third
// argument is inserted wherever the pattern occurs, and join's separator
// whenever the list has two parts. Plausible (a key template), low
// frequency. Fix: in subject(), count replace's replacement, and join's
// separator when the list has two or more parts, as text of the result:
// few only when every text argument is few.
func TestAttack42bTemplateReplaceIsKey(t *testing.T) {
	g1, g2 := apigw42b("1"), apigw42b("2")
	for _, src := range []string{
		"replace('orders/{id}', '{id}', pathParameters.orderId)",
		`replace('tenant:T/order:O', 'T', headers."X-Tenant")`,
		"join(pathParameters.orderId, ['order', 'v1'])",
	} {
		accepted42b(t, false, src, g1, g2)
	}
}

// TestAttack42bNullLiteralInMergeFingerprint states invariant 2 for a
// fingerprint that blanks a volatile field by merging a literal null
// over it (merge(detail, {metadata: `null`})): merge marks its result
// computed from a missing value (the literal null counts as missing) and
// Payload refuses it, while {a: detail.amount, n: `null`} and
// [detail.amount, `null`], the same literal null beside fields, are
// accepted. Plausible for a user (exclude a timestamp from the
// fingerprint). Fix: as for TestAttack42bNotNullFilterIsKey, a literal
// null is not a missing value (vacuous() still refuses a selection of
// nulls alone).
func TestAttack42bNullLiteralInMergeFingerprint(t *testing.T) {
	e1, e2 := eb42b("1"), eb42b("2")
	for _, src := range []string{
		"merge(detail, {metadata: `null`})",
		"merge(detail, {metadata: {sentAt: `null`}})",
	} {
		accepted42b(t, true, src, e1, e2)
	}
}

// TestAttack42bFlattenOfTaggedListIsKey states invariant 2 for flattening
// a list that holds a literal tag beside fields and lists of fields
// (['v2', detail.items[*].sku][]): ['v2', id] is a key, but [] (a
// projection in JMESPath's tree) picks each element out of the mix, so
// every element counts as a literal and the whole list is refused as
// "made of literals alone". Low severity (a version tag beside a list).
// Fix: an identity projection (flatten, [*] with no right side) keeps
// its list's provenance rather than picking each element.
func TestAttack42bFlattenOfTaggedListIsKey(t *testing.T) {
	e1, e2 := eb42b("1"), eb42b("2")
	for _, src := range []string{
		"['v2', detail.items[*].sku][]",
		"['v2', [source, detail.orderId]][]",
		"['v2', detail.orderId][*]",
	} {
		accepted42b(t, false, src, e1, e2)
	}
}

// TestAttack42bOptionalPartWithDefaultIsKey states invariant 2 for a
// key of several parts one of which is optional and given a literal
// default (an S3 object's versionId, absent for an unversioned bucket;
// a tenant header absent for the default tenant): the default marks the
// whole list missing, so every event without the optional field is
// refused, though the required part (the object key, the order id)
// tells the events apart, and no spelling of an optional part is
// accepted (a bare null part is refused too). A user would write it.
// This is a design question, not a slip: the table of
// docs/powertools.md refuses a literal default, which is right for the
// key alone (orderId || 'none') but not beside a part the event holds.
// Fix, if wanted: a part that is missing only because a literal default
// was taken does not make a list (or join) missing when another part
// is read from the event and present; a key of defaults alone stays
// refused.
func TestAttack42bOptionalPartWithDefaultIsKey(t *testing.T) {
	ev := func(n string) string {
		return `{"Records": [{"s3": {"object": {"key": "in/` + secret42b + n + `.csv"}}}], "orderId": "` + secret42b + `o` + n + `", "headers": {}}`
	}
	for _, src := range []string{
		"[Records[0].s3.object.key, Records[0].s3.object.versionId || 'null']",
		"join('@', [Records[0].s3.object.key, Records[0].s3.object.versionId || 'null'])",
		`[headers."X-Tenant" || 'default', orderId]`,
		`join('#', [not_null(headers."X-Tenant", 'public'), orderId])`,
	} {
		accepted42b(t, false, src, ev("1"), ev("2"))
	}
}

// TestAttack42bRefusalReasonOfLiteralSubject states that a refusal says
// why: docs/powertools.md lists a literal cut, padded or joined by the
// event (join(pk, ['v1']), replace('v1', pk, ”)) among the values made
// of literals alone, but the error says "computed its value from
// comparisons and literals alone (such as to_string(!id))", which
// points the user at comparisons the expression does not have. Low
// severity (the refusal is right, its reason is not). Fix: in
// provenance, a subject made of literals alone makes the result konst
// (the literal reason), one of literals and truth values few.
func TestAttack42bRefusalReasonOfLiteralSubject(t *testing.T) {
	a, b := base42b("1"), base42b("2")
	for _, src := range []string{
		"join(pk, ['v1'])",
		"replace('v1', pk, 'x')",
		"split('a#b', pk)[0]",
		"trim('v1', pk)",
		"pad_right('v1', `2`, pk[0:1])",
	} {
		o := key42b(t, src, a, b)
		err := o.firstErr()
		if !errors.Is(err, dedupe.ErrNoKey) {
			t.Errorf("Key %q: %v; want ErrNoKey", src, err)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, "literals alone") || strings.Contains(msg, "comparisons") {
			t.Errorf("Key %q: %q; want the reason of a value made of literals alone, not of comparisons", src, msg)
		}
	}
}

// TestAttack42bHeld lists what h42b tried that held: realistic keys and
// fingerprints over AWS events are accepted and tell events apart
// (invariant 2); hostile spellings of one key for every event are
// refused or tell events apart (invariant 1); and no refusal quotes an
// event value, each saying why (literals, comparisons, missing).
func TestAttack42bHeld(t *testing.T) {
	type src42b func(string) string
	realistic := []struct {
		ev          src42b
		keys, paids []string
	}{
		{apigw42b, []string{
			"powertools_json(body).orderId", "body | powertools_json(@) | [user.id, product_id]", `headers."Idempotency-Key"`,
			`not_null(headers."idempotency-key", headers."Idempotency-Key")`, `headers."idempotency-key" || headers."Idempotency-Key"`,
			`lower(trim(headers."Idempotency-Key"))`, "[pathParameters.orderId, requestContext.authorizer.claims.sub]",
			"join(':', [requestContext.authorizer.claims.sub, powertools_json(body).orderId])", "join('#', ['ORDER', pathParameters.orderId])",
			"['orders', 'v2', pathParameters.orderId]", "[httpMethod, path, body]", "powertools_json(body).items[*].sku",
			"join(',', sort(powertools_json(body).items[*].sku))", "map(&join(':', [sku, to_string(qty)]), powertools_json(body).items)",
			"powertools_json(body).items[?qty > `1`].sku | [0]", "max_by(powertools_json(body).items, &qty).sku",
			"sort_by(powertools_json(body).items, &sku)[0].sku", "split(path, '/')[-1]", "replace(path, '/orders/', '')", "trim_left(path, '/')",
			"let $b = powertools_json(body) in [$b.user.id, $b.orderId]",
			"let $b = powertools_json(body) in join('#', ['USER', $b.user.id, 'ORDER', $b.orderId])",
			"map(&split(@, '=')[1], powertools_json(body).tags)", "powertools_json(body).tags[?starts_with(@, 'a=')] | [0]",
			"pad_left(to_string(powertools_json(body).amount), `10`, '0')", "powertools_json(body).amount", "requestContext.requestId",
			`[headers."X-Tenant" || 'default', headers."Idempotency-Key"]`, "map(&join('-', ['v1', sku]), powertools_json(body).items)",
		}, []string{
			"powertools_json(body)", "powertools_json(body).[amount, items]", "body", "[headers.Host, body]",
			"{amount: powertools_json(body).amount, currency: 'EUR'}", "powertools_json(body).items[?qty > `0`]",
			"sort_by(powertools_json(body).items, &sku)", "map(&[sku, qty], powertools_json(body).items)",
			"powertools_json(body).items[*].{sku: sku, qty: qty, kind: 'line'}", "[powertools_json(body).amount, 'EUR']",
		}},
		{sqs42b, []string{
			"Records[0].messageId", "Records[*].messageId", "Records[0].messageAttributes.idempotencyKey.stringValue",
			"powertools_json(Records[0].body).id", "Records[?eventSource == 'aws:sqs'].messageId",
			"sort_by(Records, &to_number(attributes.SentTimestamp))[-1].messageId", "max_by(Records, &to_number(attributes.ApproximateReceiveCount)).messageId",
			"map(&join(':', [eventSourceARN, messageId]), Records)", "Records[*].join(':', ['sqs', messageId])",
			"[Records[0].attributes.MessageGroupId, Records[0].attributes.MessageDeduplicationId]", "split(Records[0].eventSourceARN, ':')[5]",
			"join('/', [split(Records[0].eventSourceARN, ':')[5], Records[0].messageId])", "Records[0].body | powertools_json(@).id",
			"map(&powertools_json(body).id, Records)", "Records[*].powertools_json(body).id", "sort(Records[*].messageId) | join(',', @)",
			"powertools_json(powertools_json(Records[0].body).Message).orderId", "Records[?contains(['aws:sqs', 'aws:sns'], eventSource)].messageId",
			"sort_by(Records, &join('', [attributes.MessageGroupId, '#', attributes.SentTimestamp]))[0].messageId", "Records[-1].messageId",
		}, []string{"Records[*].body", "map(&powertools_json(body), Records)", "Records[*].{id: messageId, body: body}"}},
		{s3k42b, []string{
			"[Records[0].s3.bucket.name, Records[0].s3.object.key]", "Records[0].s3.object.[key, versionId]",
			"join('/', [Records[0].s3.bucket.name, Records[0].s3.object.key])", "split(Records[0].s3.object.key, '/')[-1]",
			"Records[?starts_with(eventName, 'ObjectCreated')].s3.object.key | [0]", "join('', ['s3://', Records[0].s3.bucket.name, '/', Records[0].s3.object.key])",
			"split(Records[0].s3.object.key, '/')[-1] | split(@, '.')[0]", "powertools_json(powertools_base64(Records[0].kinesis.data)).id",
			"Records[0].kinesis.sequenceNumber", "split(Records[0].eventID, ':')[1]", "map(&powertools_json(powertools_base64(kinesis.data)).id, Records)",
			"powertools_json(powertools_base64_gzip(awslogs.data)).logEvents[0].id", "powertools_json(powertools_base64_gzip(awslogs.data)) | [logGroup, logEvents[0].id]",
		}, []string{"powertools_json(powertools_base64(Records[0].kinesis.data))"}},
		{eb42b, []string{
			"id", "detail.orderId", `[source, "detail-type", detail.orderId]`, `join(':', [source, "detail-type", detail.orderId])`,
			"detail.metadata.idempotencyKey", "detail.[customer, orderId]", "join('#', ['v1', detail.orderId])", "to_string(detail.amount)",
			"detail | [customer, orderId]", "detail.orderId || id", "detail.amount * `100`", "sum([detail.amount, `1`])",
			"let $d = detail in map(&join('#', [$d.customer, sku]), $d.items)", "let $t = source in detail.items[*].join('#', [$t, sku])",
			"detail.items[?sku != ''].sku", "not_null(detail.nope, detail.orderId)", "detail.orderId && [source, detail.orderId]",
			"[detail.customer, detail.items[*].sku][]", "sort(['v1', id])", "max_by(detail.items, &[sku]).sku",
		}, []string{"detail", "detail.[amount, items]", "merge(detail, {metadata: ''})", "{a: detail.amount, n: `null`}", "detail.amount * `100`"}},
		{ddb42b, []string{
			"Records[0].dynamodb.Keys.pk.S", "Records[0].dynamodb.Keys.[pk.S, sk.S]", "Records[0].dynamodb.Keys.*.S",
			"Records[?eventName == 'INSERT'].dynamodb.Keys.pk.S | [0]", "Records[?eventName != 'REMOVE'].dynamodb.NewImage.id.S",
			"join('#', [Records[0].dynamodb.Keys.pk.S, Records[0].dynamodb.Keys.sk.S])", "Records[?contains(['INSERT', 'MODIFY'], eventName)].eventID",
			"max_by(Records, &to_number(dynamodb.SequenceNumber)).eventID", "split(Records[0].dynamodb.Keys.pk.S, '#')[1]",
			"Records[?dynamodb.NewImage].eventID", "Records[?not_null(dynamodb.NewImage)].eventID", "Records[?!(eventName == 'REMOVE')].eventID",
			"Records[*].join('#', [eventName, dynamodb.Keys.pk.S])", "to_number(Records[0].dynamodb.NewImage.version.N)",
		}, nil},
	}
	for _, r := range realistic {
		a, b := r.ev("1"), r.ev("2")
		for _, src := range r.keys {
			accepted42b(t, false, src, a, b)
		}
		for _, src := range r.paids {
			accepted42b(t, true, src, a, b)
		}
	}

	// Hostile spellings that are refused or tell the events apart.
	a, b := base42b("1"), base42b("2")
	for _, src := range []string{
		"reverse('v1')", "reverse(id && 'v1')", "let $x = id in [$x, 'v1'][0]", "zip(['v1'], [id])[0][0]",
		"from_items(zip(['k'], [id])) | values(@)", "from_items([[id, 'v1']]) | keys(@)", "group_by(items, &'v1') | keys(@)",
		"`{\"a\":\"v1\"}`.* | [0]", "map(&@, items[*].not_null('x'))", "max(map(&'v', items))", "map(&'v1', items) | join(',', @)",
		"sort_by(items, &qty)[*].not_null('v1')", "not_null(items[?`false`], id)", "to_number('5')", "abs(`-1`)",
		"id[0:0] || 'x'", "not_null(id[0:0], 'v1')", "map(&$.id, ['a', 'b'])", "map(&[@, $.id], ['v1', 'v2'])",
		"['v1', id][::-1]", "['v1', id][::2] | [0]", "Records[*].[messageId, 'v1'][1]", "Records[*].items[*].not_null('v1')",
		"merge(@, {z: 'v1'}).*", "@.*.not_null('v1')", "Records[?$.id == messageId].not_null('x')",
		"length(to_string(amount > `5`))", "to_string(!!id)", "(id == 'x' && 'a') || 'b'", "to_string(amount < amount)",
		"map(&kind == 'a', Records)", "max_by(Records[*].{v: to_string(kind == 'a')}, &v).v", "keys(group_by(Records, &$.id))",
		"length(map(&'x', Records))", "values(group_by(Records, &kind))[0][0].messageId", "to_string(type(id) == 'string')",
		"sort([id, 'v1'])[0]", "to_array(['v1', id])[0]", "reverse(join('-', ['v1', id]))[0:2]", "join('-', ['v1', id])[0:2]",
		"split(join('#', ['T', id]), '#')[0]", "items[?qty > `100`] | [0].sku", "not_null(`\"\"`, id)",
		"keys(group_by([[pk, sk]], &to_string(length(@))))",
	} {
		noShared42b(t, false, src, a, b)
	}

	// No refusal quotes an event value, and each says why.
	for _, tt := range []struct {
		src, want string
		fp        bool
	}{
		{"['v1', id][0]", "mixes literals with fields", false},
		{"map(&'v1', items)", "literals alone", false},
		{"to_string(amount > `5`)", "comparisons and literals alone", false},
		{"to_string(nope)", "missing value", false},
		{"Records[?kind == 'z'].messageId", "empty list", false},
		{"items", "a list holding an object", false},
		{"powertools_json(id)", "not valid JSON", false},
		{"powertools_base64(id)", "not base64", false},
		{"powertools_base64_gzip(pk)", "not base64", false},
		{"abs(id)", "abs() argument 1 is a string", false},
		{"pad_left(id, `3`, id)", "pad", false},
		{"from_items([[id]])", "pair of string", false},
		{"group_by(items, &qty)", "must evaluate to a string", false},
		{"to_string(amount / `0`)", "to_string()", false},
		{"join(',', items)", "list of strings", false},
		{"amount && 'x'", "literals alone", true},
		{"to_string(nope)", "missing value", true},
		{"powertools_json(id)", "not valid JSON", true},
		{"{v: 'v1', a: amount}.v", "mixes literals with fields", true},
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
			t.Errorf("%q (fingerprint %v): accepted; want a refusal saying %q", tt.src, tt.fp, tt.want)
		case strings.Contains(err.Error(), secret42b):
			t.Errorf("%q: the refusal quotes an event value: %v", tt.src, err)
		case !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), strconv.Quote(tt.src)):
			t.Errorf("%q (fingerprint %v): %v; want it to name the expression and say %q", tt.src, tt.fp, err, tt.want)
		}
	}
}
