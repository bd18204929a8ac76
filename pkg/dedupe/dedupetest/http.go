package dedupetest

import (
	"crypto/rand"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
)

// exactResponses are handlers whose responses a replay through
// dedupe.Middleware must reproduce exactly: the headers net/http sends
// (or does not send) and the bytes of the body.
var exactResponses = []struct {
	name    string
	handler http.HandlerFunc
}{
	// net/http sniffs no Content-Type when a Content-Encoding is set.
	{"Content-Encoding without Content-Type", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Encoding", "br")
		w.Write([]byte{0x1b, 0x00, 0xff, '<', 'h', 't', 'm', 'l', '>'})
	}},
	// A flush before the first write sends the headers without one.
	{"flush before the first write", func(w http.ResponseWriter, r *http.Request) {
		http.NewResponseController(w).Flush()
		io.WriteString(w, "<html> after the flush")
	}},
	// RFC 9110 allows obs-text in field values: a Latin-1 filename.
	{"obs-text header value", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Disposition", "attachment; filename=\"caf\xe9.txt\"")
		w.Header()["X-Repeated"] = []string{"\xff one", "two"}
		w.Write([]byte{0x00, 0x80, 0xff})
	}},
	// A sniffed type is part of the response too.
	{"sniffed Content-Type", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "<html><body>sniffed</body></html>")
	}},
}

// testMiddlewareReplayExact sends each of exactResponses twice through a
// real server running dedupe.Middleware over s, and checks that the
// replay carries the first response's status, headers and body exactly
// (only Date and framing may differ, plus Idempotent-Replayed).
func testMiddlewareReplayExact(t *testing.T, s dedupe.Store) {
	for _, tt := range exactResponses {
		t.Run(tt.name, func(t *testing.T) {
			g := dedupe.New(s, &dedupe.Config{Prefix: "dedupetest-" + rand.Text()})
			runs := 0
			mw := dedupe.Middleware(g, &dedupe.HTTPConfig{SharedScope: true})
			srv := httptest.NewServer(mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				runs++
				tt.handler(w, r)
			})))
			defer srv.Close()
			send := func() (int, http.Header, string) {
				req, _ := http.NewRequest("POST", srv.URL+"/exact", strings.NewReader(`{"a":1}`))
				req.Header.Set(dedupe.HeaderIdempotencyKey, "k-1")
				req.Header.Set("Accept-Encoding", "identity")
				resp, err := srv.Client().Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				b, err := io.ReadAll(resp.Body)
				if err != nil {
					t.Fatal(err)
				}
				h := resp.Header.Clone()
				for _, k := range []string{"Date", "Content-Length", "Transfer-Encoding"} {
					h.Del(k)
				}
				return resp.StatusCode, h, string(b)
			}
			status, header, body := send()
			rstatus, rheader, rbody := send()
			if runs != 1 {
				t.Fatalf("handler ran %d times, want 1", runs)
			}
			if got := rheader.Get(dedupe.HeaderReplayed); got != "true" {
				t.Errorf("replay has %s %q, want true", dedupe.HeaderReplayed, got)
			}
			rheader.Del(dedupe.HeaderReplayed)
			if rstatus != status || rbody != body || !sameHeader(rheader, header) {
				t.Errorf("replay = %d %q %q, want %d %q %q", rstatus, rheader, rbody, status, header, body)
			}
		})
	}
}

func sameHeader(a, b http.Header) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			return false
		}
	}
	return true
}
