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
		{"too many arguments", "length(a, b)", "length() called with 2 arguments"},
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
		{"EventBridge ID", "eventbridge-event.json", "id", "1:6a7e8feb-b491-4cf7-a9f1-bf3703467718|"},
		{"EventBridge detail field", "eventbridge-event.json", "detail.orderId", "1:ord_1001|"},
		{"EventBridge two fields", "eventbridge-event.json", "[detail.customer, detail.orderId]", "2:cus_42|ord_1001|"},
		{"EventBridge whole number", "eventbridge-event.json", "detail.amount", "1:1250|"},
		{"API Gateway JSON body", "apigw-v2-jwt.json", "powertools_json(body).source", "1:tok_visa|"},
		{"Kinesis base64 data", "kinesis-event.json", "Records[0].kinesis.powertools_json(powertools_base64(data)).orderId", "1:ord_1001|"},
		{"SQS body", "sqs-event.json", "Records[1].powertools_json(body).orderId", "1:ord_1002|"},
		{"CloudWatch Logs gzip", "cloudwatch-logs-event.json", "powertools_json(powertools_base64_gzip(awslogs.data)).logEvents[0].id", "1:37915873459012348751234516712390102381928371928379182|"},
		{"value with separators", "eventbridge-event.json", "'a|b%c'", "1:a%7Cb%25c|"},
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
		{"not JSON", "powertools_json(detail.orderId).x", "not JSON"},
		{"not base64", "powertools_base64(detail.orderId)", "powertools_base64"},
		{"not gzip", "powertools_base64_gzip('aGVsbG8=')", "powertools_base64_gzip"},
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
// never meet in one key (a one-element list is its element).
func TestExprKeyInjective(t *testing.T) {
	seen := map[string]string{}
	for _, expr := range []string{"['a', 'b']", "'a|b'", "['a', 'b', '']", "'2:a|b|'", "`[\"a\", \"b|\"]`", "['a%7Cb']"} {
		k, err := dedupe.MustCompileExpr(expr).Key([]byte("{}"))
		if err != nil {
			if errors.Is(err, dedupe.ErrNoKey) {
				continue
			}
			t.Fatal(err)
		}
		if other, ok := seen[k]; ok {
			t.Errorf("%s and %s give one key %q", expr, other, k)
		}
		seen[k] = expr
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
