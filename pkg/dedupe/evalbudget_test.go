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
