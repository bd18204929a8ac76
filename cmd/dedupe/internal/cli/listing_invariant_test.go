package cli_test

import (
	"context"
	"crypto/rand"
	"strings"
	"testing"
	"time"

	"github.com/lambda-dedupe/dedupe/cmd/dedupe/internal/cli"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
)

// TestListingAndPromptShowWhatTheRecordHolds: on every store, the
// in-flight listing shows each record's lease end and a dash for a
// request ID it does not have (never an empty column that shifts the
// next), and forget's question names the stored response's status code,
// what the operator is about to let run again; a reference no record has
// is not found, with the Redis hint on Redis only.
func TestListingAndPromptShowWhatTheRecordHolds(t *testing.T) {
	ctx := context.Background()
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			now := time.Now()
			held := "cli-list/" + rand.Text()
			if _, err := b.store.Claim(ctx, dedupe.ClaimRequest{Key: held, Fingerprint: "f", Token: "tok-held", Now: now,
				LeaseUntil: now.Add(time.Hour), ExpiresAt: now.Add(2 * time.Hour)}); err != nil {
				t.Fatal(err)
			}
			code, out, errOut := run(t, "", append([]string{"inflight", "--limit", "1000"}, b.flags...)...)
			if code != cli.ExitOK {
				t.Fatalf("inflight: exit %d\n%s", code, errOut)
			}
			var line string
			for _, l := range strings.Split(out, "\n") {
				if strings.HasPrefix(l, dedupe.KeyRef(held)+" ") {
					line = l
				}
			}
			if line == "" {
				t.Fatalf("inflight does not list %s:\n%s", dedupe.KeyRef(held), out)
			}
			if strings.Contains(line, "lease -") || !strings.Contains(line, "lease "+now.Add(time.Hour).UTC().Format("2006-01-02T15")) {
				t.Errorf("inflight shows no lease end for a record leased until %v:\n%s", now.Add(time.Hour).UTC(), line)
			}
			if !strings.HasSuffix(line, "request -") {
				t.Errorf("inflight shows a record without request ID as %q, want it to end with \"request -\"", line)
			}

			done := "cli-prompt/" + rand.Text()
			if _, err := b.store.Claim(ctx, dedupe.ClaimRequest{Key: done, Fingerprint: "f", Token: "tok-done", Now: now,
				LeaseUntil: now.Add(time.Minute), ExpiresAt: now.Add(time.Hour)}); err != nil {
				t.Fatal(err)
			}
			if err := b.store.Complete(ctx, dedupe.CompleteRequest{Key: done, Token: "tok-done", Now: now, ExpiresAt: now.Add(time.Hour),
				Result: dedupe.Result{StatusCode: 201, Body: []byte(`{"ok":true}`)}}); err != nil {
				t.Fatal(err)
			}
			code, _, errOut = run(t, "no\n", append([]string{"forget", dedupe.KeyRef(done), "--token", "tok-done", "--reason", "test"}, b.flags...)...)
			if code != cli.ExitRefused || !strings.Contains(errOut, "response 201") {
				t.Errorf("forget answered no: exit %d, want %d and a question naming the response 201:\n%s", code, cli.ExitRefused, errOut)
			}

			// A reference no record has: on Redis, whose writers leave the
			// pointer a reference needs only with RefIndex, the answer says
			// so and names the lookups that need none; elsewhere a missing
			// record is only that.
			code, _, errOut = run(t, "", append([]string{"show", "key:000000000000"}, b.flags...)...)
			hinted := strings.Contains(errOut, "redisstore.Options.RefIndex")
			if code != cli.ExitNotFound || hinted != strings.HasPrefix(b.name, "redis") {
				t.Errorf("show of a reference no record has: exit %d (want %d), RefIndex hint %v on %s:\n%s", code, cli.ExitNotFound, hinted, b.name, errOut)
			}
		})
	}
}

// TestLimitMustBePositive: --limit 0 lists nothing useful and is refused
// as a usage error before any store is opened.
func TestLimitMustBePositive(t *testing.T) {
	for _, limit := range []string{"0", "-1"} {
		code, _, errOut := run(t, "", "inflight", "--limit", limit, "--table", "t", "--endpoint", "http://127.0.0.1:1")
		if code != cli.ExitUsage || !strings.Contains(errOut, "--limit "+limit) {
			t.Errorf("--limit %s: exit %d, want %d naming --limit:\n%s", limit, code, cli.ExitUsage, errOut)
		}
	}
}
