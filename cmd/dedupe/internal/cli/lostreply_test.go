package cli_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lambda-dedupe/dedupe/cmd/dedupe/internal/cli"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
)

// loseReply forwards every request to target and, the first time it sees
// a request for the DynamoDB operation op, applies it and then drops the
// connection without its reply: the SDK sees a reset after the write and
// sends it again.
func loseReply(t *testing.T, target, op string) (endpoint string, lost *atomic.Int32) {
	t.Helper()
	lost = new(atomic.Int32)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		req, err := http.NewRequestWithContext(r.Context(), r.Method, target+r.URL.RequestURI(), bytes.NewReader(body))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		req.Header = r.Header.Clone()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		reply, _ := io.ReadAll(resp.Body)
		if strings.HasSuffix(r.Header.Get("X-Amz-Target"), "."+op) && lost.Add(1) == 1 {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		w.Write(reply)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, lost
}

// loseReplyOn returns the DynamoDB backend and an endpoint in front of
// its server that loses the first reply to op (see loseReply).
func loseReplyOn(t *testing.T, op string) (backend, string, *atomic.Int32) {
	t.Helper()
	b := backends(t)[0]
	if b.name != "dynamodb" {
		t.Fatalf("first backend is %s, want dynamodb", b.name)
	}
	i := slices.Index(b.flags, "--endpoint")
	if i < 0 {
		t.Fatalf("the dynamodb backend's flags %q name no --endpoint", b.flags)
	}
	proxy, lost := loseReply(t, b.flags[i+1], op)
	return b, proxy, lost
}

// TestReleaseReplyLost: a release is applied, its reply is lost, and the
// SDK's retry meets a record that no longer matches what the operator saw.
// The command reads the record again and reports the truth: released,
// exit 0, not "changed since it was read; nothing changed".
func TestReleaseReplyLost(t *testing.T) {
	b, proxy, lost := loseReplyOn(t, "UpdateItem")
	flags := []string{"--table", b.table, "--endpoint", proxy}

	ctx := context.Background()
	now := time.Now()
	key := dedupe.StoreKey(prefix, "lost-release/"+rand.Text())
	if _, err := b.store.Claim(ctx, dedupe.ClaimRequest{Key: key, Fingerprint: "fp", Token: "tok-dead",
		Now: now, LeaseUntil: now.Add(10 * time.Minute), ExpiresAt: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := run(t, "", append([]string{"release", dedupe.KeyRef(key), "--token", "tok-dead", "--force"}, flags...)...)
	if lost.Load() < 2 {
		t.Fatalf("the release's reply was not lost and retried (%d UpdateItem calls); the test proves nothing", lost.Load())
	}
	if code != cli.ExitOK || !strings.Contains(out, "released") {
		t.Errorf("release whose reply was lost: exit %d, %q, %q; want %d and released", code, out, errOut, cli.ExitOK)
	}
	rec, err := b.store.Get(ctx, key, time.Now())
	if err != nil || rec.LeaseExpiresAt.UnixMilli() != 0 || rec.Token != "tok-dead" {
		t.Fatalf("after the release = %+v, %v; want released, owner kept", rec, err)
	}

	// A record that really changed under the release is still refused.
	key2 := dedupe.StoreKey(prefix, "changed-release/"+rand.Text())
	if _, err := b.store.Claim(ctx, dedupe.ClaimRequest{Key: key2, Fingerprint: "fp", Token: "tok-a",
		Now: now, LeaseUntil: now.Add(10 * time.Minute), ExpiresAt: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := run(t, "", append([]string{"release", dedupe.KeyRef(key2), "--token", "tok-b", "--force"}, flags...)...); code != cli.ExitRefused || !strings.Contains(errOut, "no longer owned") {
		t.Errorf("release with another token: exit %d, %q; want %d", code, errOut, cli.ExitRefused)
	}
}

// TestForgetReplyLost: a forget's DeleteItem is applied, its reply is
// lost, and the SDK's retry finds no record. The command says the key is
// forgotten (exit 0) and still writes the audit event, marked
// unconfirmed; it does not answer "gone already" with no log.
func TestForgetReplyLost(t *testing.T) {
	b, proxy, lost := loseReplyOn(t, "DeleteItem")
	ctx := context.Background()
	now := time.Now()
	key := dedupe.StoreKey(prefix, "lost-forget/"+rand.Text())
	if _, err := b.store.Claim(ctx, dedupe.ClaimRequest{Key: key, Fingerprint: "fp", Token: "tok",
		Now: now, LeaseUntil: now.Add(time.Minute), ExpiresAt: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := b.store.Complete(ctx, dedupe.CompleteRequest{Key: key, Token: "tok", Now: now, ExpiresAt: now.Add(time.Hour),
		Result: dedupe.Result{StatusCode: 201, Body: []byte(`{}`)}}); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := run(t, "", "forget", dedupe.KeyRef(key), "--token", "tok", "--reason", "INC-7", "--yes", "--table", b.table, "--endpoint", proxy)
	if lost.Load() < 2 {
		t.Fatalf("the delete's reply was not lost and retried (%d DeleteItem calls); the test proves nothing", lost.Load())
	}
	if code != cli.ExitOK || !strings.Contains(out, "forgot") {
		t.Errorf("forget whose reply was lost: exit %d, %q, %q; want %d and forgot", code, out, errOut, cli.ExitOK)
	}
	if !strings.Contains(errOut, `"msg":"dedupe: forget"`) || !strings.Contains(errOut, `"confirmed":false`) || !strings.Contains(errOut, "INC-7") {
		t.Errorf("forget whose reply was lost logged %q; want the audit event, marked unconfirmed", errOut)
	}
	if _, err := b.store.Get(ctx, key, time.Now()); err == nil {
		t.Error("the record is still there")
	}
}
