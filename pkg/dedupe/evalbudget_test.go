package dedupe_test

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
)

// TestFunctionsBuildInProportionToTheEvent: what functions build in one
// evaluation is bounded by the event's size (64 KiB, then 16 bytes for
// each of the event's), whatever builds it, so that a hostile event
// cannot make a realistic expression copy a long field once per element
// until the function runs out of memory; and what the two base64
// decoders decode is bounded in all, not only per call.
func TestFunctionsBuildInProportionToTheEvent(t *testing.T) {
	long := strings.Repeat("c", 20000)
	items := strings.TrimSuffix(strings.Repeat(`{"sku": "s"},`, 200), ",")
	ev := []byte(`{"detail": {"customer": "` + long + `", "items": [` + items + `]}}`)
	for _, src := range []string{
		"detail.items[*].to_string($.detail.customer)",
		"map(&upper($.detail.customer), detail.items)",
		"detail.items[*].replace($.detail.customer, 'c', 'cc')",
	} {
		_, err := dedupe.MustCompileExpr(src).Key(ev)
		if err == nil || !strings.Contains(err.Error(), "builds more text than its event holds") {
			t.Errorf("Key %s: %v; want refused for what it builds", src, err)
		}
	}
	// A few copies of a field are within the bound.
	if _, err := dedupe.MustCompileExpr("join('#', [detail.customer, upper(detail.customer), lower(detail.customer)])").Key(ev); err != nil {
		t.Errorf("three copies of a field: %v", err)
	}

	var z bytes.Buffer
	w := gzip.NewWriter(&z)
	w.Write(bytes.Repeat([]byte("a"), 4<<20))
	w.Close()
	blob := base64.StdEncoding.EncodeToString(z.Bytes())
	two, err := json.Marshal(map[string]any{"blobs": []string{blob, blob}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dedupe.MustCompileExpr("map(&length(powertools_base64_gzip(@)), blobs)").Payload(two); err == nil || !strings.Contains(err.Error(), "decodes more than") {
		t.Errorf("two 4 MiB inflations: %v; want refused in all", err)
	}
	one, _ := json.Marshal(map[string]any{"blobs": []string{blob}})
	if _, err := dedupe.MustCompileExpr("map(&length(powertools_base64_gzip(@)), blobs)").Payload(one); err != nil {
		t.Errorf("one 4 MiB inflation: %v", err)
	}
}

// TestBuildBoundIsExact: the bound is 64 KiB for an event of a few bytes
// (pad_left to 60,000 is built, to 70,000 refused), and 64 KiB plus 16
// bytes for each of the event's past that (a join of 22 copies of a
// 10,000-byte field is built, of 23 refused: the event is about 10 KB).
func TestBuildBoundIsExact(t *testing.T) {
	small := []byte(`{"id": "o1"}`)
	for width, ok := range map[string]bool{"60000": true, "70000": false} {
		_, err := dedupe.MustCompileExpr("pad_left(id, `" + width + "`)").Key(small)
		if (err == nil) != ok {
			t.Errorf("pad_left(id, %s) of a small event: %v, want built %v", width, err, ok)
		}
	}
	big := []byte(`{"c": "` + strings.Repeat("c", 10000) + `"}`)
	for n, ok := range map[int]bool{22: true, 23: false} {
		src := "join('', [" + strings.TrimSuffix(strings.Repeat("c,", n), ",") + "])"
		_, err := dedupe.MustCompileExpr(src).Payload(big)
		if (err == nil) != ok {
			t.Errorf("a join of %d copies of a 10,000-byte field: %v, want built %v", n, err, ok)
		}
	}
}

// TestWholeArithmeticIsExactOrRefused: a whole result of whole numbers
// is the true one or refused; a floored quotient of a negative dividend
// is floored (-7 // 2 is -4), and a fraction of whole numbers (1 / 3) is
// float64's, as JMESPath's, and accepted.
func TestWholeArithmeticIsExactOrRefused(t *testing.T) {
	ev := []byte(`{"n": -7, "a": 1, "b": 3, "big": 9007199254740991}`)
	if got, err := dedupe.MustCompileExpr("to_string(n // `2`)").Payload(ev); err != nil || string(got) != `"-4"` {
		t.Errorf("to_string(-7 // 2) = %s, %v; want \"-4\"", got, err)
	}
	if got, err := dedupe.MustCompileExpr("to_string((n - `1`) // `2`)").Payload(ev); err != nil || string(got) != `"-4"` {
		t.Errorf("to_string(-8 // 2) = %s, %v; want \"-4\"", got, err)
	}
	if _, err := dedupe.MustCompileExpr("{t: a / b}").Payload(ev); err != nil {
		t.Errorf("{t: 1 / 3}: %v; want float64's third", err)
	}
	// Past 2^53 the result is checked exactly: these are exact.
	for src, want := range map[string]string{
		"to_string((big + big) // `2`)":  `"9007199254740991"`,
		"to_string((-big - big) // `4`)": `"-4503599627370496"`,
		"to_string((-big - big) // `2`)": `"-9007199254740991"`,
		"to_string(avg([big, big]))":     `"9007199254740991"`,
	} {
		if got, err := dedupe.MustCompileExpr(src).Payload(ev); err != nil || string(got) != want {
			t.Errorf("%s = %s, %v; want %s", src, got, err, want)
		}
	}
	if _, err := dedupe.MustCompileExpr("{t: big + `2` - `2`}").Payload(ev); err == nil {
		t.Error("{t: 2^53-1 + 2 - 2}: accepted, want refused: float64 rounded it")
	}
	// A fraction of whole numbers past 2^53 is float64's, as below it.
	if _, err := dedupe.MustCompileExpr("{t: (big + big) / `3`}").Payload(ev); err != nil {
		t.Errorf("{t: (2^54-2) / 3}: %v; want float64's fraction", err)
	}
	// sum's magnitudes add up to 2^53+1, which float64 rounds to 2^53:
	// the sum is checked exactly, and float64's 2^53 is refused.
	if got, err := dedupe.MustCompileExpr("to_string(sum([big, `2`]))").Payload(ev); err == nil {
		t.Errorf("to_string(sum([2^53-1, 2])) = %s: accepted, want refused: float64 rounded it", got)
	}
	// avg's whole result is checked as sum's: float64 sums these to
	// 2^53-1, whose quarter is a fraction; the true average is 2^51.
	if got, err := dedupe.MustCompileExpr("to_string(avg([big, `2`, `-2`, `1`]))").Payload(ev); err == nil {
		t.Errorf("to_string(avg([2^53-1, 2, -2, 1])) = %s: accepted, want refused: float64 rounded its sum", got)
	}
}
