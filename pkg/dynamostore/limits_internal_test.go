package dynamostore

import (
	"bytes"
	"testing"

	"github.com/lambda-dedupe/dedupe/internal/headerenc"
)

// TestHeadersEncodeLikeHeaderenc: pkg/memstore sizes headers with
// internal/headerenc to apply this store's item limit, so both encodings
// must be the same bytes.
func TestHeadersEncodeLikeHeaderenc(t *testing.T) {
	for _, h := range []map[string][]string{
		{"A": {"1"}},
		{"Content-Type": {"application/json"}, "Set-Cookie": {"a=1", "b=2"}, "X-Nil": nil, "X-Latin1": {"caf\xe9"}},
	} {
		if got, want := encodeHeaders(h), headerenc.Encode(h); !bytes.Equal(got, want) {
			t.Errorf("encodeHeaders(%q) = %x, headerenc.Encode = %x", h, got, want)
		}
	}
}

// SortKeyValue exports sortKeyValue to the external tests.
var SortKeyValue = sortKeyValue

// SetRefOf makes s store refOf(key) as the reference of key, so that a
// test can make two keys share one.
func SetRefOf(s *Store, refOf func(string) string) { s.hooks = &testHooks{refOf: refOf} }
