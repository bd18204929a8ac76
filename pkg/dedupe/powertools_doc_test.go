package dedupe_test

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
)

// TestPowertoolsDocKeyExamples holds the examples of docs/powertools.md's
// table of keys to the code: each expression the page shows is there,
// and is refused with ErrNoKey, or is a key that two events differing in
// every field it reads tell apart, as the page says.
func TestPowertoolsDocKeyExamples(t *testing.T) {
	page, err := os.ReadFile("../../docs/powertools.md")
	if err != nil {
		t.Fatal(err)
	}
	// orderId is missing from events of the default's row: they are
	// refused for what the row says.
	const ev = `{"orderId": "o%s", "s3": {"object": {"key": "k%s"}}, "id": "i%s", "pk": "T#%s", "a": "a%s", "b": "b%s", "tenant": "t%s", "amount": %s,
		"eventName": "INSERT", "Records": [{"messageId": "m%s", "id": "r%s", "eventID": "e%s", "eventName": "INSERT", "a": "a%s", "dynamodb": {"NewImage": {}}}]}`
	both := []any{event42(t, strings.ReplaceAll(ev, "%s", "1")), event42(t, strings.ReplaceAll(ev, "%s", "2"))}
	for _, tt := range []struct {
		expr    string
		refused bool
	}{
		{"not_null(`\"v1\"`, orderId)", true},
		{"orderId && 'v1'", true},
		{"'v1' \\|\\| orderId", true},
		{"['a', 'b']", true},
		{"map(&'orderId', Records)", true},
		{"join(orderId, ['v1'])", true},
		{"replace('v1', orderId, '')", true},
		{"length([a, b])", true},
		{"keys({k: a})", true},
		{"sort_by(['v1', 'v2'], &$.amount)[0]", true},
		{"['v1', orderId][0]", true},
		{"{v: 'v1', i: orderId}.i", true},
		{"merge({orderId: 'none'}, @).orderId", true},
		{"join('#', ['ORDER', orderId])[0:64]", true},
		{"[to_string(amount > `5`), orderId][0]", true},
		{"to_string(!orderId)", true},
		{"to_string(orderId == 'x')", true},
		{"['v1', orderId]", false},
		{"join('-', ['v1', orderId])", false},
		{"split(pk, '#')[1]", false},
		{"replace(orderId, '-', '')", false},
		{"max_by(Records, &join('-', [a, 'x'])).messageId", false},
		{"orderId \\|\\| id", false},
		{"replace('orders/{id}', '{id}', orderId)", false},
		{"Records[?dynamodb.NewImage != null].eventID", false},
		{"[s3.object.key, s3.object.versionId \\|\\| 'null']", false},
		{"Records[?eventName=='INSERT'].id", false},
		{"[detail.customer, detail.orderId]", false},
	} {
		if !strings.Contains(string(page), "`"+tt.expr+"`") {
			t.Errorf("docs/powertools.md does not show `%s`", tt.expr)
		}
		src := strings.ReplaceAll(tt.expr, `\|`, "|")
		evs := both
		if strings.Contains(src, "'none'") {
			evs = []any{event42(t, `{"id": "1"}`), event42(t, `{"id": "2"}`)}
		}
		if src == "[detail.customer, detail.orderId]" {
			src = "[tenant, orderId]" // the same shape, on this event
		}
		got, err := keys42(t, src, evs...)
		switch {
		case tt.refused && err == nil:
			t.Errorf("Key %q gave %q: the page says it is refused", src, got)
		case tt.refused && !errors.Is(err, dedupe.ErrNoKey):
			t.Errorf("Key %q: %v; want ErrNoKey", src, err)
		case !tt.refused && err != nil:
			t.Errorf("Key %q: %v; the page says it is a key", src, err)
		case !tt.refused && got[0] == got[1]:
			t.Errorf("Key %q: two events share %q", src, got[0])
		}
	}
}
