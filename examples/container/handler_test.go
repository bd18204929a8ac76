package main

import (
	"crypto/rand"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/lambda-dedupe/dedupe/examples/internal/exampletest"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
)

func TestServer(t *testing.T) {
	exampletest.ForEachStore(t, func(t *testing.T, store dedupe.Store) {
		g := dedupe.New(store, &dedupe.Config{Prefix: "jobs-" + rand.Text(), DefaultLease: 30 * time.Second, Heartbeat: 10 * time.Second})
		srv := httptest.NewServer(NewServer(g, slog.New(slog.DiscardHandler)))
		defer srv.Close()
		post := func(user, key string) (int, string, string) {
			req, _ := http.NewRequest(http.MethodPost, srv.URL+"/jobs", strings.NewReader(`{"report":"monthly"}`))
			if user != "" {
				req.Header.Set(userHeader, user)
			}
			if key != "" {
				req.Header.Set("Idempotency-Key", key)
			}
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(b), resp.Header.Get(dedupe.HeaderReplayed)
		}
		s1, b1, _ := post("alice", "k-1")
		s2, b2, r2 := post("alice", "k-1")
		s3, b3, r3 := post("bob", "k-1")
		s4, _, _ := post("alice", "")
		s5, _, _ := post("", "k-2")
		switch {
		case s1 != 202 || s2 != 202 || b1 != b2 || r2 != "true":
			t.Errorf("retry = %d %s (replayed %q), want the first %d %s replayed", s2, b2, r2, s1, b1)
		case s3 != 202 || b3 == b1 || r3 != "":
			t.Errorf("another caller's same key = %d %s (replayed %q), want a job of its own", s3, b3, r3)
		case s4 != 400:
			t.Errorf("no key = %d, want 400", s4)
		case s5 != 500:
			t.Errorf("no caller = %d, want 500 (no principal)", s5)
		}
		resp, err := srv.Client().Get(srv.URL + "/healthz")
		if err != nil || resp.StatusCode != 200 {
			t.Errorf("healthz = %v, %v", resp, err)
		}
		resp.Body.Close()
	})
}
