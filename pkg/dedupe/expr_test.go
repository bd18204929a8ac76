package dedupe_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
)

// readFixture returns a file of testdata.
func readFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestCompileExprRefuses checks that a bad expression is refused when it
// is compiled, not when the first event comes.
func TestCompileExprRefuses(t *testing.T) {
	for _, tt := range []struct{ name, expr, want string }{
		{"empty", "", "empty"},
		{"blank", "  ", "empty"},
		{"syntax", "detail.[", "compile expression"},
		{"unknown function", "powertools_jsn(body).id", "unknown function powertools_jsn()"},
		{"nested unknown function", "a[?contains_ci(b, 'x')].id", "unknown function contains_ci()"},
		{"too few arguments", "powertools_json()", "powertools_json() called with 0 arguments"},
		{"too many arguments", "length(a, b)", "length() called with 2 arguments; it takes 1"},
		{"not gzip, on every event", "powertools_base64_gzip('aGVsbG8=')", "fails on every event: powertools_base64_gzip(): the data is not gzip"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := dedupe.CompileExpr(tt.expr)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("CompileExpr(%q) = %v, want an error containing %q", tt.expr, err, tt.want)
			}
		})
	}
	for _, ok := range []string{"id", "powertools_json(body).orderId", "[detail.customer, detail.orderId]", "'orders'", "join('-', [a, b])", "max_by(a, &b).c"} {
		if _, err := dedupe.CompileExpr(ok); err != nil {
			t.Errorf("CompileExpr(%q) = %v, want it compiled", ok, err)
		}
	}
}

// TestExprKeyOnFixtures checks keys selected from real events, through
// Powertools' functions.
func TestExprKeyOnFixtures(t *testing.T) {
	for _, tt := range []struct{ name, fixture, expr, want string }{
		{"EventBridge ID", "eventbridge-event.json", "id", "=s6a7e8feb-b491-4cf7-a9f1-bf3703467718|"},
		{"EventBridge detail field", "eventbridge-event.json", "detail.orderId", "=sord_1001|"},
		{"EventBridge two fields", "eventbridge-event.json", "[detail.customer, detail.orderId]", "2:scus_42|sord_1001|"},
		{"EventBridge whole number", "eventbridge-event.json", "detail.amount", "=n1250|"},
		{"API Gateway JSON body", "apigw-v2-jwt.json", "powertools_json(body).source", "=stok_visa|"},
		{"Kinesis base64 data", "kinesis-event.json", "Records[0].kinesis.powertools_json(powertools_base64(data)).orderId", "=sord_1001|"},
		{"SQS body", "sqs-event.json", "Records[1].powertools_json(body).orderId", "=sord_1002|"},
		{"CloudWatch Logs gzip", "cloudwatch-logs-event.json", "powertools_json(powertools_base64_gzip(awslogs.data)).logEvents[0].id", "=s37915873459012348751234516712390102381928371928379182|"},
		{"value with separators", "eventbridge-event.json", "join('', [detail.orderId, 'a|b%c'])", "=sord_1001a%7Cb%25c|"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := dedupe.MustCompileExpr(tt.expr).Key(readFixture(t, tt.fixture))
			if err != nil || got != tt.want {
				t.Errorf("Key = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

// TestExprKeyRefuses checks that what is not an identity never becomes a
// key: every one of these is refused with ErrNoKey.
func TestExprKeyRefuses(t *testing.T) {
	ev := readFixture(t, "eventbridge-event.json")
	for _, tt := range []struct{ name, expr, want string }{
		{"missing field", "detail.orderID", "null"},
		{"empty string", "detail.coupon || ''", "an empty string"},
		{"object", "detail", "an object"},
		{"empty list", "resources", "an empty list"},
		{"boolean", "detail.amount > `1`", "a boolean"},
		{"fraction", "detail.amount / `3`", "not a whole number"},
		{"huge number", "`12345678901234567890`", "not a whole number below 2^53"},
		{"list with null", "[detail.orderId, detail.nope]", "a list holding null"},
		{"not JSON", "powertools_json(detail.orderId).x", "not valid JSON at byte 1"},
		{"not base64", "powertools_base64(detail.orderId)", "powertools_base64"},
		// A literal the event only chooses is the key of every event
		// that reaches it.
		{"literal first", "not_null(`\"v1\"`, detail.orderId)", "literals alone"},
		{"literal after &&", "detail.orderId && 'v1'", "literals alone"},
		{"literal before ||", "'v1' || detail.orderId", "literals alone"},
		{"literal", "'order-1'", "literals alone"},
		{"list of literals", "['a', 'b']", "literals alone"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := dedupe.MustCompileExpr(tt.expr).Key(ev)
			if !errors.Is(err, dedupe.ErrNoKey) || !strings.Contains(err.Error(), tt.want) || got != "" {
				t.Errorf("Key = %q, %v; want ErrNoKey saying %q", got, err, tt.want)
			}
		})
	}
	if _, err := dedupe.MustCompileExpr("id").Key([]byte("{not json")); !errors.Is(err, dedupe.ErrNoKey) {
		t.Errorf("Key of a broken event = %v, want ErrNoKey", err)
	}
}

// TestExprKeyInjective checks that lists and scalars with separators
// never meet in one key: each value below, selected from an event, gives
// a key of its own (a list holding an empty string is refused).
func TestExprKeyInjective(t *testing.T) {
	seen := map[string]string{}
	for _, v := range []string{`["a", "b"]`, `"a|b"`, `"2:a|b|"`, `["a", "b|"]`, `["a%7Cb"]`, `"a%7Cb"`, `["a|b"]`, `"=sa|"`} {
		k, err := dedupe.MustCompileExpr("x").Key([]byte(`{"x":` + v + `}`))
		if err != nil {
			t.Fatalf("Key of %s: %v", v, err)
		}
		if other, ok := seen[k]; ok {
			t.Errorf("%s and %s give one key %q", v, other, k)
		}
		seen[k] = v
	}
	if k, err := dedupe.MustCompileExpr("x").Key([]byte(`{"x":["a", "b", ""]}`)); !errors.Is(err, dedupe.ErrNoKey) {
		t.Errorf("Key of a list holding \"\" = %q, %v; want ErrNoKey", k, err)
	}
}

// TestExprPayload checks fingerprint selections: canonical JSON, null
// refused, and numbers beyond float64's exact range refused.
func TestExprPayload(t *testing.T) {
	ev := readFixture(t, "eventbridge-event.json")
	got, err := dedupe.MustCompileExpr("detail.{amount: amount, currency: currency}").Payload(ev)
	if err != nil || string(got) != `{"amount":1250,"currency":"EUR"}` {
		t.Errorf("Payload = %s, %v", got, err)
	}
	for _, expr := range []string{"detail.nope", "`{\"id\": 9007199254740993}`"} {
		if _, err := dedupe.MustCompileExpr(expr).Payload(ev); !errors.Is(err, dedupe.ErrNoFingerprint) {
			t.Errorf("Payload(%s) = %v, want ErrNoFingerprint", expr, err)
		}
	}
}

// TestCompileExprRefusesWhatFailsEveryEvent checks the refusals of
// issue 30: variadic functions need an argument, an argument that can
// never have the type the function takes, and an undefined variable.
func TestCompileExprRefusesWhatFailsEveryEvent(t *testing.T) {
	for _, tt := range []struct{ expr, want string }{
		{"not_null()", "not_null() called with 0 arguments; it takes at least 1"},
		{"merge()", "merge() called with 0 arguments; it takes at least 1"},
		{"zip(a)", "zip() called with 1 arguments; it takes at least 2"},
		{"detail.[not_null()]", "not_null() called with 0 arguments"},
		{"find_first(a)", "find_first() called with 1 arguments; it takes 2 to 4"},
		{"lower({a: a})", "lower() argument 1 is always an object; it takes a string"},
		{"join(',', `1`)", "join() argument 2 is always a number; it takes a list of strings"},
		{"length(a == b)", "length() argument 1 is always null or a boolean"},
		{"map(a, b)", "map() argument 1 is always a JSON value; it takes an expression reference (&)"},
		{"abs('x')", "abs() argument 1 is always a string; it takes a number"},
		{"a[*].to_number(@) || powertools_json('{')", "fails on every event: powertools_json(): the string is not valid JSON"},
		{"$x", "variable $x is not defined"},
	} {
		if _, err := dedupe.CompileExpr(tt.expr); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("CompileExpr(%q) = %v, want an error containing %q", tt.expr, err, tt.want)
		}
	}
	for _, ok := range []string{"not_null(a, b)", "merge(a)", "zip(a, b)", "let $x = a in $x.b", "lower(a)", "join(',', a)", "sort_by(a, &b)[0].c"} {
		if _, err := dedupe.CompileExpr(ok); err != nil {
			t.Errorf("CompileExpr(%q) = %v, want it compiled", ok, err)
		}
	}
}

// TestExprKeyRefusesMissingValues checks that a key computed from a
// missing value is refused like a missing field (issue 30): it would be
// the key of every event without that field.
func TestExprKeyRefusesMissingValues(t *testing.T) {
	ev := []byte(`{"id":"e-1","source":"shop","detail":{"amount":1250,"lines":[{"sku":"a","qty":1},{"sku":"b"}]},
		"Records":[{"eventName":"INSERT","id":"r-1"},{"id":"r-2"}]}`)
	for _, expr := range []string{
		"to_string(detail.orderId)",
		"type(detail.orderId)",
		"to_array(detail.orderId)",
		"to_string(detail.[orderId, amount])",
		"join('-', [id, to_string(detail.orderId)])",
		"detail.orderId || 'none'",
		"not_null(detail.orderId, 'none')",
		"detail.lines[*].qty",
		"sum(detail.lines[*].qty)",
		"length(detail.lines[*].qty)",
		"to_string(detail.nope[*].x)",
		"[id, to_string(detail.orderId)]",
		"let $o = detail.orderId in to_string($o)",
		"detail.orderId == null && 'absent'",
		"to_string(detail.orderId == 'x')",
		"[@][?detail.orderId == null].source",
		"Records[?!eventName].id",
		"length(to_string(detail.orderId)) + `1`",
		"`1` + length(to_string(detail.orderId))",
		"detail.orderId[0:2]",
	} {
		if k, err := dedupe.MustCompileExpr(expr).Key(ev); !errors.Is(err, dedupe.ErrNoKey) {
			t.Errorf("Key(%s) = %q, %v; want ErrNoKey", expr, k, err)
		}
	}
	// Falling back from one field to another, and filtering on a field
	// some elements lack, are keys of what the event holds.
	for expr, want := range map[string]string{
		"not_null(detail.orderId, id)":       "=se-1|",
		"detail.orderId || id":               "=se-1|",
		"Records[?eventName=='INSERT'].id":   "1:sr-1|",
		"to_string(detail.amount)":           "=s1250|",
		"detail.lines[0].qty":                "=n1|",
		"join('-', [source, id])":            "=sshop-e-1|",
		"detail.lines[?qty].sku":             "1:sa|",
		"length(detail.lines)":               "=n2|",
		"[source, detail.amount]":            "2:sshop|n1250|",
		"let $d = detail in $d.lines[1].sku": "=sb|",
		"detail.amount > `100` && id":        "=se-1|",
		"id[0:2]":                            "=se-|",
		"map(&sku, detail.lines)":            "2:sa|sb|",
		"length(id) + `1`":                   "=n4|",
	} {
		if k, err := dedupe.MustCompileExpr(expr).Key(ev); err != nil || k != want {
			t.Errorf("Key(%s) = %q, %v; want %q", expr, k, err, want)
		}
	}
}

// TestExprKeyInjectiveAcrossTypes checks that selections of different
// types never give one key (issue 30), and that numbers are keyed by
// their exact value, not through float64.
func TestExprKeyInjectiveAcrossTypes(t *testing.T) {
	seen := map[string]string{}
	for _, v := range []string{`1`, `"1"`, `["1"]`, `[1]`, `[1, "1"]`, `["1", 1]`, `"n1"`, `"s1"`, `["1|"]`, `"1:s1|"`,
		`1234567890123456789`, `1234567890123456788`, `"1234567890123456789"`, `99999999999999999999999`} {
		k, err := dedupe.MustCompileExpr("x").Key([]byte(`{"x":` + v + `}`))
		if err != nil {
			t.Fatalf("Key of %s: %v", v, err)
		}
		if other, ok := seen[k]; ok {
			t.Errorf("%s and %s give one key %q", v, other, k)
		}
		seen[k] = v
	}
	// Text that is not UTF-8 is no JSON: decoded, every invalid byte
	// would be U+FFFD, and "\xff" and "\xfe" one key.
	for _, raw := range []string{"{\"x\":\"a\xff\"}", "{\"x\":\"a\xfe\"}"} {
		if k, err := dedupe.MustCompileExpr("x").Key([]byte(raw)); !errors.Is(err, dedupe.ErrNoKey) {
			t.Errorf("Key of %q = %q, %v; want ErrNoKey", raw, k, err)
		}
	}
	// One number, however written, is one key.
	for _, v := range []string{`100`, `100.0`, `1e2`, `1.00E+2`} {
		if k, err := dedupe.MustCompileExpr("x").Key([]byte(`{"x":` + v + `}`)); err != nil || k != "=n100|" {
			t.Errorf("Key of %s = %q, %v; want =n100|", v, k, err)
		}
	}
	for _, v := range []string{`1.5`, `1e-3`, `1e999999999`} {
		if k, err := dedupe.MustCompileExpr("x").Key([]byte(`{"x":` + v + `}`)); !errors.Is(err, dedupe.ErrNoKey) {
			t.Errorf("Key of %s = %q, %v; want ErrNoKey", v, k, err)
		}
	}
	// A function computes in float64: what it cannot hold exactly is no key.
	// So does an operator, whichever side the number is on.
	for _, expr := range []string{"to_string(x)", "to_string(x + `0`)", "to_string(`0` + x)", "x * `0`", "`0` * x"} {
		if k, err := dedupe.MustCompileExpr(expr).Key([]byte(`{"x":1234567890123456789}`)); !errors.Is(err, dedupe.ErrNoKey) {
			t.Errorf("%s of a number beyond float64 = %q, %v; want ErrNoKey", expr, k, err)
		}
	}
}

// TestExprKeyStable checks that one event always gives one key, whatever
// Go's map order: the * projection and keys, values and items visit an
// object in key order.
func TestExprKeyStable(t *testing.T) {
	ev := []byte(`{"d":{"k":"v-k","c":"v-c","x":"v-x","a":"v-a","q":"v-q","m":"v-m","b":"v-b","z":"v-z"}}`)
	for expr, want := range map[string]string{
		"d.*":                  "8:sv-a|sv-b|sv-c|sv-k|sv-m|sv-q|sv-x|sv-z|",
		"values(d)":            "8:sv-a|sv-b|sv-c|sv-k|sv-m|sv-q|sv-x|sv-z|",
		"keys(d)":              "8:sa|sb|sc|sk|sm|sq|sx|sz|",
		"items(d)[*][1]":       "8:sv-a|sv-b|sv-c|sv-k|sv-m|sv-q|sv-x|sv-z|",
		"join(',', values(d))": "=sv-a,v-b,v-c,v-k,v-m,v-q,v-x,v-z|",
	} {
		for range 50 {
			if k, err := dedupe.MustCompileExpr(expr).Key(ev); err != nil || k != want {
				t.Fatalf("Key(%s) = %q, %v; want %q every time", expr, k, err, want)
			}
		}
	}
}

// TestExprPayloadRefusesNoInformation checks that a fingerprint
// selection made only of nulls and empty containers is refused like a
// null one (issue 30): every event whose fields are named otherwise
// would have one fingerprint.
func TestExprPayloadRefusesNoInformation(t *testing.T) {
	ev := []byte(`{"detail":{"total":1250,"curr":"EUR","lines":[],"meta":{},"notes":[null,{"a":[]}]}}`)
	for _, expr := range []string{
		"detail.[amount, currency]",
		"detail.{amount: amount, currency: currency}",
		"detail.lines[*].price",
		"detail.lines",
		"detail.meta",
		"detail.notes",
		"[detail.nope, {a: detail.nope2, b: [detail.nope3]}]",
		"to_string(detail.amount)",
		"[detail.total, to_string(detail.amount)]",
		"detail.amount || 'none'",
	} {
		if p, err := dedupe.MustCompileExpr(expr).Payload(ev); !errors.Is(err, dedupe.ErrNoFingerprint) {
			t.Errorf("Payload(%s) = %s, %v; want ErrNoFingerprint", expr, p, err)
		}
	}
	for expr, want := range map[string]string{
		"detail.[total, currency]":            `[1250,null]`,
		"detail.{total: total, lines: lines}": `{"lines":[],"total":1250}`,
		"detail.total":                        `1250`,
		"`0` == detail.total":                 `false`,
	} {
		if p, err := dedupe.MustCompileExpr(expr).Payload(ev); err != nil || string(p) != want {
			t.Errorf("Payload(%s) = %s, %v; want %s", expr, p, err, want)
		}
	}
	// Numbers selected as they are keep their digits; computed ones must
	// be exact.
	big := []byte(`{"a":1234567890123456789,"b":1234567890123456788}`)
	pa, errA := dedupe.MustCompileExpr("a").Payload(big)
	pb, errB := dedupe.MustCompileExpr("b").Payload(big)
	if errA != nil || errB != nil || string(pa) != "1234567890123456789" || string(pa) == string(pb) {
		t.Errorf("Payload of big numbers = %s, %v and %s, %v; want each exact", pa, errA, pb, errB)
	}
	if p, err := dedupe.MustCompileExpr("a + `0`").Payload(big); !errors.Is(err, dedupe.ErrNoFingerprint) {
		t.Errorf("Payload of a big number through +: %s, %v; want ErrNoFingerprint", p, err)
	}
}

// secrets are event values that must never appear in an error or a log
// line.
var secrets = []string{"4111111111111111", "737", "alice@example.com", "Alice Liddell"}

// TestExprErrorsNeverQuoteValues checks that refusals name the
// expression and the kind of what was wrong, never an event value
// (issue 30): the library's own type errors print the argument.
func TestExprErrorsNeverQuoteValues(t *testing.T) {
	ev := []byte(`{"card":{"number":"4111111111111111","cvc":"737"},"email":"alice@example.com","name":"Alice Liddell",
		"nums":[4111111111111111,737],"body":"{\"cvc\": 737, 4111111111111111}","data":"YWxpY2VAZXhhbXBsZS5jb20"}`)
	for _, expr := range []string{
		"powertools_json(card)", "lower(card)", "join(',', nums)", "join(',', card.*)", "powertools_json(body).x",
		"powertools_json(email)", "powertools_base64(data)", "powertools_base64_gzip(email)", "abs(email)",
		"sort_by([card, email], &@)", "max_by([card], &number)", "card", "nums", "email == `1` && card",
		"to_number(email) || card", "starts_with(card, email)", "pad_left(email, `1.5`)", "split(name, ' ', `-1`)",
	} {
		e := dedupe.MustCompileExpr(expr)
		_, kerr := e.Key(ev)
		_, perr := e.Payload(ev)
		for _, err := range []error{kerr, perr} {
			if err == nil {
				continue
			}
			for _, s := range secrets {
				if strings.Contains(err.Error(), s) {
					t.Errorf("%s: the error quotes %q: %v", expr, s, err)
				}
			}
		}
	}
	broken := []byte(`{"card":"4111111111111111", "cvc": 737 x}`)
	if _, err := dedupe.MustCompileExpr("card").Key(broken); err == nil || strings.Contains(err.Error(), "4111") || strings.Contains(err.Error(), "'x'") {
		t.Errorf("Key of broken JSON: %v; want an error quoting nothing", err)
	}
}

// TestExprKeyPowertools checks that expressions pick keys out of any
// event with Powertools' functions, and that a missing field is named.
func TestExprKeyPowertools(t *testing.T) {
	kinesisData := `{"data":"eyJvcmRlcklkIjoib3JkXzcifQ=="}` // base64 of {"orderId":"ord_7"}
	k, err := dedupe.MustCompileExpr("powertools_json(powertools_base64(data)).orderId").Key([]byte(kinesisData))
	if k != "=sord_7|" || err != nil {
		t.Errorf("got %q, %v; want =sord_7|", k, err)
	}
	_, err = dedupe.MustCompileExpr("orderID").Key([]byte(`{"orderId":"ord_7"}`))
	if want := `dedupe: expression selected no usable key from the event: "orderID" selected null (a missing field?)`; !errors.Is(err, dedupe.ErrNoKey) || err.Error() != want {
		t.Errorf("got %v, want %s", err, want)
	}
}
