package dedupe_test

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/memstore"
)

// serve sends one request with key and body to h.
func serve(h http.Handler, method, target, key, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, target, strings.NewReader(body))
	if key != "" {
		req.Header.Set(dedupe.HeaderIdempotencyKey, key)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func TestMiddlewareServeMuxPattern(t *testing.T) {
	runs := 0
	mw := dedupe.Middleware(dedupe.New(memstore.New(), nil), &dedupe.HTTPConfig{SharedScope: true})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs++
		io.WriteString(w, r.PathValue("id"))
	})
	mux := http.NewServeMux()
	mux.Handle("PUT /orders/{id}", mw(h))
	mux.Handle("/things/", mw(h))

	tests := []struct {
		name   string
		method string
		target string
		status int
		runs   int
	}{
		{"first", "PUT", "/orders/1", 200, 1},
		{"same order replays", "PUT", "/orders/1", 200, 1},
		{"same pattern, other order is 422", "PUT", "/orders/2", 422, 1},
		{"pattern without method, POST", "POST", "/things/a", 200, 2},
		{"pattern without method, PATCH is another scope", "PATCH", "/things/a", 200, 3},
		{"pattern without method, other path is 422", "POST", "/things/b", 422, 3},
	}
	for _, tt := range tests {
		rec := serve(mux, tt.method, tt.target, "k", `{"status":"shipped"}`)
		if rec.Code != tt.status || runs != tt.runs {
			t.Errorf("%s: status %d after %d runs, want %d after %d", tt.name, rec.Code, runs, tt.status, tt.runs)
		}
	}
}

// TestMiddlewareRecording sends each response through a real server and
// checks that the replay is the same on the wire, apart from Date and the
// framing (a flushed response goes out chunked, its replay in one piece
// with a Content-Length).
func TestMiddlewareRecording(t *testing.T) {
	tests := []struct {
		name    string
		handler http.HandlerFunc
		status  int
		body    string
	}{
		{"nothing written is an empty 200", func(http.ResponseWriter, *http.Request) {}, 200, ""},
		{"headers set before WriteHeader", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Location", "/things/1")
			w.Header().Add("Set-Cookie", "a=1")
			w.Header().Add("Set-Cookie", "b=2")
			w.WriteHeader(201)
			w.Header().Set("X-Late", "not sent")
			io.WriteString(w, "created")
		}, 201, "created"},
		{"sniffed content type", func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, "<html><body>hi</body></html>")
		}, 200, "<html><body>hi</body></html>"},
		{"sniffed after explicit WriteHeader", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(202)
			w.Write([]byte("\x89PNG\r\n\x1a\n\x00\x00"))
		}, 202, "\x89PNG\r\n\x1a\n\x00\x00"},
		{"suppressed content type", func(w http.ResponseWriter, r *http.Request) {
			w.Header()["Content-Type"] = nil
			io.WriteString(w, "<html></html>")
		}, 200, "<html></html>"},
		{"informational response not recorded", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Link", "</style.css>; rel=preload")
			w.WriteHeader(http.StatusEarlyHints)
			w.WriteHeader(202)
			io.WriteString(w, "accepted")
		}, 202, "accepted"},
		{"flushed in pieces", func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, "part 1, ")
			if err := http.NewResponseController(w).Flush(); err != nil {
				t.Errorf("Flush: %v", err)
			}
			io.WriteString(w, "<html> part 2")
		}, 200, "part 1, <html> part 2"},
		{"204 without body", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) }, 204, ""},
		// Issue 9, case 6: net/http sniffs no Content-Type in these two.
		{"Content-Encoding without Content-Type", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Encoding", "br")
			w.Write([]byte("\x1f\x8b\x08\x00 not really gzip"))
		}, 200, "\x1f\x8b\x08\x00 not really gzip"},
		{"flush before the first write", func(w http.ResponseWriter, r *http.Request) {
			http.NewResponseController(w).Flush()
			io.WriteString(w, "<html> late")
		}, 200, "<html> late"},
		{"headers set before an explicit 200", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Location", "/things/1")
			w.WriteHeader(200)
			w.Header().Set("X-Late", "not sent")
			io.WriteString(w, "ok")
		}, 200, "ok"},
		{"explicit 200 and nothing written", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(200)
			w.Header().Set("X-Late", "not sent")
		}, 200, ""},
		{"flushed before and after the first write", func(w http.ResponseWriter, r *http.Request) {
			http.NewResponseController(w).Flush()
			io.WriteString(w, "<html> late")
			http.NewResponseController(w).Flush()
			io.WriteString(w, " and later")
		}, 200, "<html> late and later"},
		{"obs-text header value", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Disposition", "attachment; filename=\"caf\xe9.txt\"")
			io.WriteString(w, "x")
		}, 200, "x"},
		{"handler sees the whole body", func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			w.Write(b)
		}, 200, "amount=1250&currency=EUR"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			runs := 0
			srv := httptest.NewServer(dedupe.Middleware(dedupe.New(memstore.New(), nil), &dedupe.HTTPConfig{SharedScope: true})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				runs++
				tt.handler(w, r)
			})))
			defer srv.Close()
			send := func() (*http.Response, string) {
				req, _ := http.NewRequest("POST", srv.URL+"/things", strings.NewReader("amount=1250&currency=EUR"))
				req.Header.Set(dedupe.HeaderIdempotencyKey, "k")
				resp, err := srv.Client().Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				resp.Header.Del("Date")
				resp.Header.Del("Content-Length")
				return resp, string(b)
			}
			first, firstBody := send()
			replay, replayBody := send()
			if runs != 1 {
				t.Fatalf("handler ran %d times, want 1", runs)
			}
			if first.StatusCode != tt.status || firstBody != tt.body {
				t.Errorf("first = %d %q, want %d %q", first.StatusCode, firstBody, tt.status, tt.body)
			}
			want := first.Header.Clone()
			want.Set(dedupe.HeaderReplayed, "true")
			if replay.StatusCode != first.StatusCode || replayBody != firstBody || !equalHeader(replay.Header, want) {
				t.Errorf("replay = %d %v %q, want %d %v %q", replay.StatusCode, replay.Header, replayBody, first.StatusCode, want, firstBody)
			}
		})
	}
}

func equalHeader(a, b http.Header) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if strings.Join(v, "\n") != strings.Join(b[k], "\n") {
			return false
		}
	}
	return true
}

func TestMiddlewareBody(t *testing.T) {
	runs := 0
	h := dedupe.Middleware(dedupe.New(memstore.New(), nil), &dedupe.HTTPConfig{MaxBodyBytes: 10, SharedScope: true})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs++
	}))
	tests := []struct {
		name   string
		req    func() *http.Request
		status int
		runs   int
	}{
		{"declared length over the limit", func() *http.Request {
			r := httptest.NewRequest("POST", "/x", strings.NewReader("12345678901"))
			r.Header.Set(dedupe.HeaderIdempotencyKey, "k")
			return r
		}, 413, 0},
		{"unknown length over the limit", func() *http.Request {
			r := httptest.NewRequest("POST", "/x", io.MultiReader(strings.NewReader("123456"), strings.NewReader("78901")))
			r.ContentLength = -1
			r.Header.Set(dedupe.HeaderIdempotencyKey, "k")
			return r
		}, 413, 0},
		{"unreadable body", func() *http.Request {
			r := httptest.NewRequest("POST", "/x", iotest.ErrReader(errors.New("connection reset")))
			r.ContentLength = -1
			r.Header.Set(dedupe.HeaderIdempotencyKey, "k")
			return r
		}, 400, 0},
		{"at the limit", func() *http.Request {
			r := httptest.NewRequest("POST", "/x", bytes.NewReader([]byte("1234567890")))
			r.Header.Set(dedupe.HeaderIdempotencyKey, "k")
			return r
		}, 200, 1},
		{"no body", func() *http.Request {
			r := httptest.NewRequest("POST", "/y", nil)
			r.Header.Set(dedupe.HeaderIdempotencyKey, "k")
			return r
		}, 200, 2},
		{"unguarded requests are not limited", func() *http.Request {
			return httptest.NewRequest("POST", "/x", strings.NewReader("12345678901"))
		}, 200, 3},
	}
	for _, tt := range tests {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, tt.req())
		if rec.Code != tt.status || runs != tt.runs {
			t.Errorf("%s: status %d after %d runs, want %d after %d", tt.name, rec.Code, runs, tt.status, tt.runs)
		}
	}
}

// TestMiddlewareNeedsPrincipal checks issue 9, case 1 for net/http: a
// Middleware that could only put every caller in one scope is refused at
// construction, unless that is asked for.
func TestMiddlewareNeedsPrincipal(t *testing.T) {
	g := dedupe.New(memstore.New(), nil)
	for name, cfg := range map[string]*dedupe.HTTPConfig{"nil config": nil, "no principal": {MaxBodyBytes: 10}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: Middleware did not panic", name)
				}
			}()
			dedupe.Middleware(g, cfg)
		}()
	}
	dedupe.Middleware(g, &dedupe.HTTPConfig{SharedScope: true})
	dedupe.Middleware(g, &dedupe.HTTPConfig{Principal: func(any) string { return "p" }})
}
