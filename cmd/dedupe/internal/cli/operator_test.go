package cli_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"

	"github.com/lambda-dedupe/dedupe/cmd/dedupe/internal/cli"
	"github.com/lambda-dedupe/dedupe/localtest/redistest"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/dynamostore"
	"github.com/lambda-dedupe/dedupe/pkg/pgstore"
	"github.com/lambda-dedupe/dedupe/pkg/redisstore"
)

// hostile are client-controlled strings as they reach a record: a request
// ID from X-Request-Id, a raw path behind net/http without a pattern
// (part of the key), a trace header, a response body.
var hostile = []struct{ name, value string }{
	{"clear screen", "\x1b[2J\x1b[H"},
	{"OSC 52 clipboard", "\x1b]52;c;Y3VybCBldmlsLnNofHNo\x07"},
	{"OSC title, ST", "\x1b]0;pwned\x1b\\"},
	{"CR and erase-line", "req-1\r\x1b[2Kowner:        tok-evil"},
	{"newline forging a line", "req-1\nowner:        tok-evil"},
	{"bidi override", "req-\u202egnp.exe"},
	{"bidi isolates", "\u2066evil\u2069"},
	{"C1 CSI", "\u009b2J"},
	{"C1 OSC", "\u009d0;t\u009c"},
	{"zero width and BOM", "a\u200bb\u200dc\ufeff"},
	{"backspace, DEL", "abc\x08\x08\x7f"},
	{"NUL, tab, vertical tab, form feed", "a\x00b\tc\vd\fe"},
	{"line and paragraph separators", "a\u2028b\u2029c"},
	{"invalid UTF-8", "a\xff\xfe\x9bb"},
	{"a backslash that is not an escape", `\x1b`},
}

// clean reports what in out could act on a terminal: invalid UTF-8, or a
// rune that is a control (but for the newlines ending lines), a format
// character (bidi, zero width) or a line or paragraph separator.
func clean(out string) error {
	if !utf8.ValidString(out) {
		return fmt.Errorf("invalid UTF-8 in %q", out)
	}
	for i, r := range out {
		switch {
		case r == '\n':
		case r < 0x20, r == 0x7f, r >= 0x80 && r < 0xa0, unicode.Is(unicode.Cf, r), r == 0x2028, r == 0x2029, r == utf8.RuneError:
			return fmt.Errorf("rune %U at byte %d of %q", r, i, out)
		}
	}
	return nil
}

// viaJSON returns s as JSON carries it: each byte of invalid UTF-8
// replaced by U+FFFD.
func viaJSON(s string) string {
	b, _ := json.Marshal(s)
	var out string
	json.Unmarshal(b, &out)
	return out
}

// showLabels are the lines show prints for a record, each at most once.
var showLabels = []string{"ref:", "key:", "status:", "owner:", "first owner:", "lease until:", "expires:",
	"fingerprint:", "created:", "updated:", "request id:", "trace:", "response:"}

// checkShowLines fails unless every line of out is one of show's, each
// label once: no line was forged.
func checkShowLines(t *testing.T, what, out string) {
	t.Helper()
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		i := slices.IndexFunc(showLabels, func(l string) bool { return strings.HasPrefix(line, l) })
		if i < 0 || seen[showLabels[i]] {
			t.Errorf("%s: forged or repeated line %q in:\n%s", what, line, out)
			continue
		}
		seen[showLabels[i]] = true
	}
}

// TestEscape checks the escaping of every hostile string: nothing left
// that acts on a terminal, and distinct inputs stay distinct.
func TestEscape(t *testing.T) {
	seen := map[string]string{}
	for _, h := range hostile {
		t.Run(h.name, func(t *testing.T) {
			got := cli.Escape(h.value)
			if err := clean(got); err != nil || strings.Contains(got, "\n") {
				t.Errorf("Escape(%q) = %q: %v", h.value, got, err)
			}
			if prev, ok := seen[got]; ok {
				t.Errorf("Escape(%q) = Escape(%q) = %q", h.value, prev, got)
			}
			if back, ok := cli.Unescape(got); !ok || back != h.value {
				t.Errorf("Unescape(%q) = %q, %v; want %q", got, back, ok, h.value)
			}
			seen[got] = h.value
		})
	}
	for in, want := range map[string]string{
		"order-42":             "order-42",
		"café ü 日本 😀":          "café ü 日本 😀",
		"a\x1b[2Jb":            `a\x1b[2Jb`,
		"a\nb\r\tc":            `a\nb\r\tc`,
		`\`:                    `\\`,
		"\u202e":               `\u202e`,
		"\u009b":               `\u009b`,
		"\xff":                 `\xff`,
		"\ufffd":               `\ufffd`,
		"\U000e0001":           `\U000e0001`,
		"POST /a%7Cb|x y":      "POST /a%7Cb|x y",
		"Root=1-6761f3b2-3f4a": "Root=1-6761f3b2-3f4a",
	} {
		if got := cli.Escape(in); got != want {
			t.Errorf("Escape(%q) = %q, want %q", in, got, want)
		}
		if back, ok := cli.Unescape(want); !ok || back != in {
			t.Errorf("Unescape(%q) = %q, %v; want %q", want, back, ok, in)
		}
	}
	// What Escape never writes is no escaped form: such a value names a
	// key as typed.
	for _, s := range []string{`a\b`, `\x41`, `\x5c`, `\u00e9`, `\u0041`, `\ud800`, `\x1`, `tail\`, `\q`} {
		if got, ok := cli.Unescape(s); ok {
			t.Errorf("Unescape(%q) = %q, true; want false", s, got)
		}
	}
}

// TestEscapeJSON checks what JSON output does to every hostile string:
// nothing left that acts on a terminal (encoding/json writes C1
// controls, bidi and zero-width characters raw), and the same value when
// decoded.
func TestEscapeJSON(t *testing.T) {
	for _, h := range append(hostile, struct{ name, value string }{"beyond the BMP", "tag \U000e0041, emoji \U0001f600"}) {
		t.Run(h.name, func(t *testing.T) {
			b, err := json.Marshal(map[string]string{"k" + h.value: h.value})
			if err != nil {
				t.Fatal(err)
			}
			got := cli.EscapeJSON(b)
			if err := clean(string(got)); err != nil {
				t.Errorf("EscapeJSON(%s) = %s: %v", b, got, err)
			}
			var m map[string]string
			if err := json.Unmarshal(got, &m); err != nil || m["k"+viaJSON(h.value)] != viaJSON(h.value) || len(m) != 1 {
				t.Errorf("EscapeJSON(%s) = %s decodes to %q, %v; want the same value", b, got, m, err)
			}
		})
	}
	if b := []byte(`{"a":"café 日本 😀"}`); string(cli.EscapeJSON(b)) != string(b) {
		t.Errorf("EscapeJSON(%s) = %s; want it unchanged", b, cli.EscapeJSON(b))
	}
}

// TestHostileBytes writes every hostile string into records on every
// store, as the key's client part, the request ID, the trace, the
// fingerprint and the response body, and runs every command that prints
// them: show (by ref and by key, with --body), inflight, stranded,
// release's refusal and forget's question. Nothing reaches the terminal
// raw, no line is forged, and JSON stays JSON with the bytes intact.
func TestHostileBytes(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			now := time.Now()
			accepted := 0
			for _, h := range hostile {
				client := "hostile/" + rand.Text()
				if utf8.ValidString(h.value) {
					client += "/" + h.value
				}
				stuck, done := dedupe.StoreKey(prefix, client+"/stuck"), dedupe.StoreKey(prefix, client+"/done")
				_, err := b.store.Claim(ctx, dedupe.ClaimRequest{Key: stuck, Fingerprint: "fp" + h.value, Token: "tok-stuck",
					Now: now.Add(-time.Minute), LeaseUntil: now.Add(-30 * time.Second), ExpiresAt: now.Add(time.Hour),
					RequestID: h.value, Trace: h.value})
				if err != nil {
					// PostgreSQL's text and DynamoDB's strings refuse NUL
					// or invalid UTF-8: nothing stored, nothing to print.
					t.Logf("%s: the store refuses it: %v", h.name, err)
					continue
				}
				accepted++
				if _, err := b.store.Claim(ctx, dedupe.ClaimRequest{Key: done, Fingerprint: "fp", Token: "tok-done",
					Now: now, LeaseUntil: now.Add(time.Minute), ExpiresAt: now.Add(time.Hour)}); err != nil {
					t.Fatal(err)
				}
				if err := b.store.Complete(ctx, dedupe.CompleteRequest{Key: done, Token: "tok-done", Now: now, ExpiresAt: now.Add(time.Hour),
					Result: dedupe.Result{StatusCode: 201, Body: []byte(h.value + "\n")}, RequestID: h.value, Trace: h.value}); err != nil {
					t.Fatal(err)
				}
				outputs := map[string]string{}
				runAll := func(name, stdin string, args ...string) {
					code, out, errOut := run(t, stdin, append(args, b.flags...)...)
					outputs[name] = out + errOut
					switch name {
					case "show", "show --stored-key", "show completed":
						if code != cli.ExitOK {
							t.Errorf("%s: %s: exit %d: %s", h.name, name, code, errOut)
						}
						checkShowLines(t, h.name+": "+name, out)
					case "inflight", "stranded":
						for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
							if !refLine.MatchString(line) {
								t.Errorf("%s: %s: forged line %q", h.name, name, line)
							}
						}
					}
				}
				runAll("show", "", "show", dedupe.KeyRef(stuck))
				runAll("show --stored-key", "", "show", "--stored-key", stuck)
				runAll("show completed", "", "show", dedupe.KeyRef(done))
				runAll("show --body", "", "show", dedupe.KeyRef(done), "--body")
				runAll("inflight", "", "inflight", "--limit", "1000")
				runAll("stranded", "", "stranded", "--limit", "1000")
				runAll("release refused", "", "release", dedupe.KeyRef(stuck), "--token", h.value)
				runAll("forget asked", "no\n", "forget", dedupe.KeyRef(done), "--token", "tok-done", "--reason", "x")
				// JSON output, and forget's log line (JSON on stderr),
				// reach the same terminal: encoding/json and slog write C1
				// controls, bidi overrides and zero-width characters raw.
				runAll("show -o json", "", "show", dedupe.KeyRef(stuck), "-o", "json")
				runAll("show --body -o json", "", "show", dedupe.KeyRef(done), "--body", "-o", "json")
				runAll("inflight -o json", "", "inflight", "--limit", "1000", "-o", "json")
				runAll("forget --yes", "", "forget", dedupe.KeyRef(done), "--token", "tok-done", "--reason", "x", "--yes")
				if !strings.Contains(outputs["forget --yes"], `"original_request_id"`) {
					t.Errorf("%s: forget --yes logged no line: %q", h.name, outputs["forget --yes"])
				}
				for name, out := range outputs {
					if name == "show --body" {
						out = strings.ReplaceAll(out, "\t", "") // a body keeps its tabs and lines
					}
					if err := clean(out); err != nil {
						t.Errorf("%s: %s: %v", h.name, name, err)
					}
				}
				if n := strings.Count(outputs["forget asked"], "Type yes: "); n != 1 {
					t.Errorf("%s: forget asked %d times: %q", h.name, n, outputs["forget asked"])
				}
				// JSON keeps the bytes (as JSON can: invalid UTF-8 becomes
				// U+FFFD).
				_, out, _ := run(t, "", append([]string{"show", dedupe.KeyRef(stuck), "-o", "json"}, b.flags...)...)
				var v struct{ Key, RequestID, Trace string }
				decodeJSON(t, out, &v)
				if want := viaJSON(h.value); v.Key != viaJSON(stuck) || v.RequestID != want || v.Trace != want {
					t.Errorf("%s: show -o json = %+v; want the stored strings", h.name, v)
				}
			}
			if b.name == "redis" && accepted != len(hostile) {
				t.Errorf("redis stored %d of %d hostile strings; want all (it keeps bytes)", accepted, len(hostile))
			}
		})
	}
}

// TestHostileEvent: the key command prints what a saved event carries, a
// raw path behind a $default route included, escaped.
func TestHostileEvent(t *testing.T) {
	raw, err := os.ReadFile("testdata/order-42.json")
	if err != nil {
		t.Fatal(err)
	}
	var ev map[string]any
	if err := json.Unmarshal(raw, &ev); err != nil {
		t.Fatal(err)
	}
	ev["routeKey"] = "$default"
	ev["rawPath"] = "/pay\x1b]52;c;ZXZpbA==\x07\r\nowner: x\u202e"
	file := filepath.Join(t.TempDir(), "event.json")
	b, _ := json.Marshal(ev)
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := run(t, "", "key", "--event", file, "--prefix", prefix)
	if code != cli.ExitOK {
		t.Fatalf("key: exit %d: %s", code, errOut)
	}
	if err := clean(out + errOut); err != nil || strings.Count(out, "\n") != 7 {
		t.Errorf("key --event printed %q: %v; want 7 clean lines", out, err)
	}
}

// TestReleaseRefusals: release refuses a running lease unless --force
// (which warns), a record released already (by the guard, which keeps
// its token), and a record changed since it was read; on every store.
func TestReleaseRefusals(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			now := time.Now()
			key := dedupe.StoreKey(prefix, "running/"+rand.Text())
			ref := dedupe.KeyRef(key)
			if _, err := b.store.Claim(ctx, dedupe.ClaimRequest{Key: key, Fingerprint: "fp", Token: "tok-live",
				Now: now, LeaseUntil: now.Add(10 * time.Minute), ExpiresAt: now.Add(time.Hour)}); err != nil {
				t.Fatal(err)
			}
			release := func(extra ...string) (int, string, string) {
				return run(t, "", append(append([]string{"release", ref, "--token", "tok-live"}, extra...), b.flags...)...)
			}
			if code, _, errOut := run(t, "", append([]string{"show", ref, "--body"}, b.flags...)...); code != cli.ExitNotFound {
				t.Errorf("show --body of a record in flight: exit %d, %q; want %d", code, errOut, cli.ExitNotFound)
			}
			gone := dedupe.KeyRef(key + "/never-claimed")
			if code, _, _ := run(t, "", append([]string{"release", gone, "--token", "x", "--force"}, b.flags...)...); code != cli.ExitNotFound {
				t.Errorf("release of no record: exit %d, want %d", code, cli.ExitNotFound)
			}
			if code, _, _ := run(t, "", append([]string{"forget", gone, "--token", "x", "--reason", "x", "--yes"}, b.flags...)...); code != cli.ExitNotFound {
				t.Errorf("forget of no record: exit %d, want %d", code, cli.ExitNotFound)
			}
			code, _, errOut := release()
			if code != cli.ExitRefused || !strings.Contains(errOut, "is running") || !strings.Contains(errOut, "--force") {
				t.Errorf("release of a running lease: exit %d, %q; want %d naming --force", code, errOut, cli.ExitRefused)
			}
			if rec, err := b.store.Get(ctx, key, now); err != nil || !rec.LeaseExpiresAt.After(now) {
				t.Fatalf("after the refusal = %+v, %v; want the lease still running", rec, err)
			}
			code, out, errOut := release("--force")
			if code != cli.ExitOK || !strings.Contains(errOut, "warning") || !strings.Contains(errOut, "second time") || !strings.Contains(out, "released") {
				t.Errorf("release --force: exit %d, %q, %q; want a warning naming the second run, then released", code, out, errOut)
			}
			if code, _, errOut := release("--force"); code != cli.ExitRefused || !strings.Contains(errOut, "released already") {
				t.Errorf("release of a released record: exit %d, %q; want %d", code, errOut, cli.ExitRefused)
			}

			// The guard's own release, after its function failed.
			g := dedupe.New(b.store, &dedupe.Config{Prefix: prefix})
			client := "failed/" + rand.Text()
			if _, err := g.Do(ctx, dedupe.Call{Key: client, Fingerprint: "fp"}, func(context.Context) (dedupe.Result, error) {
				return dedupe.Result{}, errors.New("processor down")
			}); err == nil {
				t.Fatal("the run did not fail")
			}
			rec, err := b.store.Get(ctx, g.Key(client), time.Now())
			if err != nil || rec.LeaseExpiresAt.UnixMilli() != 0 {
				t.Fatalf("after the guard's release = %+v, %v", rec, err)
			}
			if code, _, errOut := run(t, "", append([]string{"release", dedupe.KeyRef(rec.Key), "--token", rec.Token}, b.flags...)...); code != cli.ExitRefused || !strings.Contains(errOut, "released already") {
				t.Errorf("release after the guard's release: exit %d, %q; want %d", code, errOut, cli.ExitRefused)
			}
		})
	}
}

// collidingKeys share key:7a743c048cb0 (see dedupetest).
var collidingKeys = [2]string{"collide/297653359cfa", "collide/34d17601cd45"}

// TestAmbiguousRef: two records share a reference on every store. show
// prints both, each with its key, and warns; release and forget refuse
// the ref, naming both keys, and act on the one named by --stored-key.
func TestAmbiguousRef(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			now := time.Now()
			ref := dedupe.KeyRef(collidingKeys[0])
			a, ok := b.store.(dedupe.Admin)
			if !ok {
				t.Fatal("not an Admin")
			}
			forgetAll := func() {
				recs, _ := a.FindRef(ctx, ref, now)
				for _, r := range recs {
					_ = a.Forget(ctx, r.Key, r.Token)
				}
			}
			forgetAll()
			t.Cleanup(forgetAll)
			for i, k := range collidingKeys {
				tok := []string{"tok-alice", "tok-mallory"}[i]
				if _, err := b.store.Claim(ctx, dedupe.ClaimRequest{Key: k, Fingerprint: "fp", Token: tok, Now: now,
					LeaseUntil: now.Add(-time.Second), ExpiresAt: now.Add(time.Hour), RequestID: "req-" + tok}); err != nil {
					t.Fatal(err)
				}
				if err := b.store.Complete(ctx, dedupe.CompleteRequest{Key: k, Token: tok, Now: now, ExpiresAt: now.Add(time.Hour),
					Result: dedupe.Result{StatusCode: 201, Body: []byte(tok)}}); err != nil {
					t.Fatal(err)
				}
			}
			code, out, errOut := run(t, "", append([]string{"show", ref}, b.flags...)...)
			if code != cli.ExitOK || !strings.Contains(out, "key:          "+collidingKeys[0]) || !strings.Contains(out, "key:          "+collidingKeys[1]) ||
				!strings.Contains(errOut, "2 records share "+ref) {
				t.Errorf("show of a colliding ref: exit %d\n%s\n%s\nwant both records and a warning", code, out, errOut)
			}
			code, out, _ = run(t, "", append([]string{"show", ref, "-o", "json"}, b.flags...)...)
			var views []struct{ Key string }
			decodeJSON(t, out, &views)
			if code != cli.ExitOK || len(views) != 2 {
				t.Errorf("show -o json: exit %d, %d records; want both", code, len(views))
			}
			for _, args := range [][]string{
				{"show", ref, "--body"},
				{"forget", ref, "--token", "tok-alice", "--reason", "x", "--yes"},
				{"release", ref, "--token", "tok-alice"},
			} {
				code, _, errOut := run(t, "", append(args, b.flags...)...)
				if code != cli.ExitUsage || !strings.Contains(errOut, "--stored-key "+collidingKeys[0]) || !strings.Contains(errOut, "--stored-key "+collidingKeys[1]) {
					t.Errorf("%s of a colliding ref: exit %d, %q; want %d naming both keys", args[0], code, errOut, cli.ExitUsage)
				}
			}
			// Both still there; the one named is forgotten, the other kept.
			if recs, err := a.FindRef(ctx, ref, now); err != nil || len(recs) != 2 {
				t.Fatalf("after the refusals = %d records, %v; want both", len(recs), err)
			}
			if code, _, errOut := run(t, "", append([]string{"forget", "--stored-key", collidingKeys[1], "--token", "tok-mallory", "--reason", "x", "--yes"}, b.flags...)...); code != cli.ExitOK {
				t.Fatalf("forget --stored-key: exit %d: %s", code, errOut)
			}
			if recs, err := a.FindRef(ctx, ref, now); err != nil || len(recs) != 1 || recs[0].Key != collidingKeys[0] {
				t.Errorf("after forget --stored-key = %+v, %v; want Alice's record only", recs, err)
			}
		})
	}
}

// TestStoredKeyAsShown: --stored-key takes a key as show prints it,
// escaped, on every store: a client's key with a backslash or a control
// character (a raw path behind net/http, an Idempotency-Key) is still
// named by what the operator copies from show's key line or from a
// refusal's --stored-key; and as the JSON output holds it, raw. A value
// that names two records, one as typed and one as show escapes it, is
// refused (exit 2) naming both.
func TestStoredKeyAsShown(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			now := time.Now()
			id := rand.Text()
			claim := func(key, tok string) {
				t.Helper()
				if _, err := b.store.Claim(ctx, dedupe.ClaimRequest{Key: key, Fingerprint: "fp", Token: tok, Now: now.Add(-time.Minute),
					LeaseUntil: now.Add(-30 * time.Second), ExpiresAt: now.Add(time.Hour)}); err != nil {
					t.Fatal(err)
				}
			}
			key := dedupe.StoreKey(prefix, `POST /files/a\b`+"\x1b]0;t\x07\u202e/"+id)
			claim(key, "tok-hostile")
			code, out, errOut := run(t, "", append([]string{"show", dedupe.KeyRef(key)}, b.flags...)...)
			shown, ok := "", false
			for _, line := range strings.Split(out, "\n") {
				if v, found := strings.CutPrefix(line, "key:          "); found {
					shown, ok = v, true
				}
			}
			if code != cli.ExitOK || !ok || shown == key {
				t.Fatalf("show: exit %d, key line %q (%v): %s; want the key, escaped", code, shown, ok, errOut)
			}
			for _, named := range []struct{ how, value string }{{"as show prints it", shown}, {"raw, as -o json holds it", key}} {
				code, out, errOut := run(t, "", append([]string{"show", "--stored-key", named.value}, b.flags...)...)
				if code != cli.ExitOK || !strings.Contains(out, "key:          "+shown+"\n") {
					t.Errorf("show --stored-key %s: exit %d, %q %q; want the record", named.how, code, out, errOut)
				}
			}
			if code, out, errOut := run(t, "", append([]string{"release", "--stored-key", shown, "--token", "tok-hostile"}, b.flags...)...); code != cli.ExitOK {
				t.Errorf("release --stored-key as shown: exit %d, %q %q; want released", code, out, errOut)
			}

			// Two records: one whose key holds the text \x1b, one whose key
			// holds the escape character show prints as \x1b. (The text
			// \x41 would name one record: show never writes an A so.)
			literal, meant := dedupe.StoreKey(prefix, `lit/\x1b/`+id), dedupe.StoreKey(prefix, "lit/\x1b/"+id)
			claim(literal, "tok-literal")
			claim(meant, "tok-meant")
			code, _, errOut = run(t, "", append([]string{"release", "--stored-key", literal, "--token", "tok-literal"}, b.flags...)...)
			if code != cli.ExitUsage || !strings.Contains(errOut, dedupe.KeyRef(literal)) || !strings.Contains(errOut, dedupe.KeyRef(meant)) {
				t.Errorf("release --stored-key naming two records: exit %d, %q; want %d naming both", code, errOut, cli.ExitUsage)
			}
			if rec, err := b.store.Get(ctx, literal, now); err != nil || rec.LeaseExpiresAt.UnixMilli() == 0 {
				t.Errorf("after the refusal = %+v, %v; want it untouched", rec, err)
			}
			// As show prints it, the literal one is named alone.
			if code, _, errOut := run(t, "", append([]string{"release", "--stored-key", cli.Escape(literal), "--token", "tok-literal"}, b.flags...)...); code != cli.ExitOK {
				t.Errorf("release --stored-key %q: exit %d, %q; want released", cli.Escape(literal), code, errOut)
			}
		})
	}
}

// runEnv runs the command with the environment env and the system user
// user (an error when empty).
func runEnv(t *testing.T, env map[string]string, user, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := cli.Run(context.Background(), cli.Env{
		Args: args, Stdin: strings.NewReader(stdin), Stdout: &stdout, Stderr: &stderr,
		Getenv: func(k string) string { return env[k] },
		CurrentUser: func() (string, error) {
			if user == "" {
				return "", errors.New("user: unknown userid 1000")
			}
			return user, nil
		},
	})
	return code, stdout.String(), stderr.String()
}

// TestForgetOperator: forget logs who forgot the key: --operator, else
// the environment, else the system's user, else it asks; with --yes and
// nobody named it refuses. Never "unknown".
func TestForgetOperator(t *testing.T) {
	b := backends(t)[0]
	ctx := context.Background()
	tests := []struct {
		name      string
		env       map[string]string
		user      string
		stdin     string
		args      []string
		wantCode  int
		wantActor string
	}{
		{"flag", map[string]string{"USER": "alice"}, "root", "", []string{"--operator", "bob", "--yes"}, cli.ExitOK, "bob"},
		{"DEDUPE_OPERATOR", map[string]string{"DEDUPE_OPERATOR": "carol", "USER": "alice"}, "root", "", []string{"--yes"}, cli.ExitOK, "carol"},
		{"LOGNAME", map[string]string{"LOGNAME": "dave"}, "root", "", []string{"--yes"}, cli.ExitOK, "dave"},
		{"system user", nil, "erin", "", []string{"--yes"}, cli.ExitOK, "erin"},
		{"asked", nil, "", "frank\nyes\n", nil, cli.ExitOK, "frank"},
		{"asked, no answer", nil, "", "\n", nil, cli.ExitRefused, ""},
		{"nobody, --yes", nil, "", "", []string{"--yes"}, cli.ExitUsage, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := dedupe.StoreKey(prefix, "forget-operator/"+rand.Text())
			now := time.Now()
			if _, err := b.store.Claim(ctx, dedupe.ClaimRequest{Key: key, Fingerprint: "fp", Token: "tok", Now: now,
				LeaseUntil: now.Add(time.Minute), ExpiresAt: now.Add(time.Hour)}); err != nil {
				t.Fatal(err)
			}
			if err := b.store.Complete(ctx, dedupe.CompleteRequest{Key: key, Token: "tok", Now: now, ExpiresAt: now.Add(time.Hour),
				Result: dedupe.Result{StatusCode: 400}}); err != nil {
				t.Fatal(err)
			}
			args := append([]string{"forget", dedupe.KeyRef(key), "--token", "tok", "--reason", "INC-1"}, tt.args...)
			code, _, errOut := runEnv(t, tt.env, tt.user, tt.stdin, append(args, b.flags...)...)
			if code != tt.wantCode {
				t.Fatalf("exit %d, want %d: %s", code, tt.wantCode, errOut)
			}
			if strings.Contains(errOut, `"operator":"unknown"`) || (tt.wantActor != "" && !strings.Contains(errOut, `"operator":"`+tt.wantActor+`"`)) {
				t.Errorf("log %q; want operator %q", errOut, tt.wantActor)
			}
			_, err := b.store.Get(ctx, key, now)
			if deleted := errors.Is(err, dedupe.ErrNotFound); deleted != (tt.wantCode == cli.ExitOK) {
				t.Errorf("deleted %v (%v); want %v", deleted, err, tt.wantCode == cli.ExitOK)
			}
		})
	}
}

// TestGlobalFlags: -o and the store flags come before the command or
// after it.
func TestGlobalFlags(t *testing.T) {
	b := backends(t)[0]
	ctx := context.Background()
	now := time.Now()
	key := dedupe.StoreKey(prefix, "global-flags/"+rand.Text())
	if _, err := b.store.Claim(ctx, dedupe.ClaimRequest{Key: key, Fingerprint: "fp", Token: "tok", Now: now,
		LeaseUntil: now.Add(time.Minute), ExpiresAt: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	ref := dedupe.KeyRef(key)
	for _, args := range [][]string{
		append([]string{"show", ref, "-o", "json"}, b.flags...),
		append([]string{"-o", "json", "show", ref}, b.flags...),
		append(append([]string{"-o=json"}, b.flags...), "show", ref),
		append(append([]string{"--o", "json"}, b.flags...), "show", "--stored-key", key),
		// Every store flag usage lists, the S3 endpoint of show --body
		// included.
		append(append([]string{"--s3-endpoint", "http://127.0.0.1:1", "-o", "json"}, b.flags...), "show", ref),
	} {
		code, out, errOut := run(t, "", args...)
		var v struct{ Ref string }
		if code != cli.ExitOK || json.Unmarshal([]byte(out), &v) != nil || v.Ref != ref {
			t.Errorf("dedupe %s: exit %d, %q, %q; want the record as JSON", strings.Join(args, " "), code, out, errOut)
		}
	}
	for _, args := range [][]string{
		{"--yes", "forget", ref},     // not a global flag
		{"-o", "json"},               // no command
		{"--table", "t", "key", "x"}, // key takes no store
	} {
		if code, _, errOut := run(t, "", args...); code != cli.ExitUsage {
			t.Errorf("dedupe %s: exit %d, want %d: %s", strings.Join(args, " "), code, cli.ExitUsage, errOut)
		}
	}
}

// TestStrandedAfterReap is StrandedRecordsAlarm's first runbook step on
// the stores with a reaper: after the reaper counted stranded records,
// dedupe stranded lists every one of them.
func TestStrandedAfterReap(t *testing.T) {
	for _, b := range backends(t) {
		reap := reaperOf(b.store)
		if reap == nil {
			continue // Redis has no reaper
		}
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			now := time.Now()
			var keys []string
			for range 5 {
				k := dedupe.StoreKey(prefix, "reaped/"+rand.Text())
				if _, err := b.store.Claim(ctx, dedupe.ClaimRequest{Key: k, Fingerprint: "fp", Token: "tok-dead", Now: now.Add(-10 * time.Minute),
					LeaseUntil: now.Add(-9 * time.Minute), ExpiresAt: now.Add(time.Hour), RequestID: "req-dead"}); err != nil {
					t.Fatal(err)
				}
				keys = append(keys, k)
			}
			counted, err := reap(ctx, now)
			if err != nil || counted < len(keys) {
				t.Fatalf("reap counted %d, %v; want at least %d", counted, err, len(keys))
			}
			code, out, errOut := run(t, "", append([]string{"stranded", "-o", "json", "--limit", "1000"}, b.flags...)...)
			if code != cli.ExitOK {
				t.Fatalf("stranded: exit %d: %s", code, errOut)
			}
			var list struct{ Records []struct{ Ref, State string } }
			decodeJSON(t, out, &list)
			for _, k := range keys {
				if !slices.ContainsFunc(list.Records, func(r struct{ Ref, State string }) bool { return r.Ref == dedupe.KeyRef(k) && r.State == "stranded" }) {
					t.Errorf("stranded does not list %s, which the reaper counted: %s", dedupe.KeyRef(k), out)
				}
			}
		})
	}
}

// TestShardMismatch: writers on 16 shards, the command on its default 8:
// inflight and stranded refuse, naming the fix, instead of listing part
// of what is in flight; with --shards 16 they list everything.
func TestShardMismatch(t *testing.T) {
	b := backends(t)[0]
	if b.name != "dynamodb" {
		t.Fatalf("first backend is %s, want dynamodb", b.name)
	}
	writer := dynamoStore(t, b, 16)
	ctx := context.Background()
	now := time.Now()
	for range 24 {
		k := dedupe.StoreKey(prefix, "shards/"+rand.Text())
		if _, err := writer.Claim(ctx, dedupe.ClaimRequest{Key: k, Fingerprint: "fp", Token: "tok", Now: now,
			LeaseUntil: now.Add(-time.Second), ExpiresAt: now.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	for _, cmd := range []string{"inflight", "stranded"} {
		code, out, errOut := run(t, "", append([]string{cmd, "--limit", "1000"}, b.flags...)...)
		if code != cli.ExitError || !strings.Contains(errOut, "--shards") || out != "" {
			t.Errorf("%s with 8 shards: exit %d, %q, %q; want %d naming --shards, nothing listed", cmd, code, out, errOut, cli.ExitError)
		}
		code, out, errOut = run(t, "", append([]string{cmd, "--limit", "1000", "--shards", "16", "-o", "json"}, b.flags...)...)
		var list struct{ Records []struct{ Ref string } }
		decodeJSON(t, out, &list)
		if code != cli.ExitOK || len(list.Records) != 24 {
			t.Errorf("%s --shards 16: exit %d, %d records; want 24: %s", cmd, code, len(list.Records), errOut)
		}
	}
}

// refLine matches a line of inflight's text output.
var refLine = regexp.MustCompile(`^key:[0-9a-f]{12}  `)

// reaperOf returns a function that runs the reaper of st and returns how
// many stranded records it counted (the alarm's metric); nil for a store
// without one.
func reaperOf(st dedupe.Store) func(ctx context.Context, now time.Time) (int, error) {
	switch s := st.(type) {
	case *dynamostore.Store:
		return func(ctx context.Context, now time.Time) (int, error) {
			r, err := s.Reap(ctx, dynamostore.ReapOptions{Now: func() time.Time { return now }})
			return r.Found, err
		}
	case *pgstore.Store:
		return func(ctx context.Context, now time.Time) (int, error) {
			r, err := s.Reap(ctx, pgstore.ReapOptions{Now: func() time.Time { return now }})
			return r.Retired, err
		}
	}
	return nil
}

// dynamoStore returns a store on b's DynamoDB table with shards shards.
func dynamoStore(t *testing.T, b backend, shards int) *dynamostore.Store {
	t.Helper()
	s, err := dynamostore.New(b.dynamo, dynamostore.Options{Table: b.table, Shards: shards})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestRedisClusterFromOneNode: an operator gives the URL of one node of a
// Redis Cluster, as a console shows it. The command reads the whole
// cluster: stranded lists the records of every master, and show finds a
// record by ref whatever slot its pointer is in. Through a client of
// that one node, stranded listed a third of them and exited 0.
func TestRedisClusterFromOneNode(t *testing.T) {
	curl := redistest.ClusterURL(t)
	copts, err := redis.ParseClusterURL(curl)
	if err != nil {
		t.Fatal(err)
	}
	cc := redis.NewClusterClient(copts)
	t.Cleanup(func() { cc.Close() })
	rp := "clitest:" + rand.Text()[:8] + ":"
	s, err := redisstore.New(cc, redisstore.Options{Prefix: rp, RefIndex: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	now := time.Now()
	const n = 30
	var keys []string
	for i := range n {
		key := dedupe.StoreKey(prefix, fmt.Sprintf("node/%d", i))
		keys = append(keys, key)
		if _, err := s.Claim(ctx, dedupe.ClaimRequest{Key: key, Fingerprint: "fp", Token: "tok", Now: now.Add(-time.Minute),
			LeaseUntil: now.Add(-30 * time.Second), ExpiresAt: now.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	node := "redis://" + copts.Addrs[0]
	code, out, errOut := run(t, "", "stranded", "--redis", node, "--redis-prefix", rp)
	if got := strings.Count(out, "\n"); code != cli.ExitOK || got != n {
		t.Errorf("stranded through %s: exit %d, %d of %d records: %s", node, code, got, n, errOut)
	}
	for _, key := range keys {
		if code, _, errOut := run(t, "", "show", dedupe.KeyRef(key), "--redis", node, "--redis-prefix", rp); code != cli.ExitOK {
			t.Errorf("show %s through %s: exit %d: %s", dedupe.KeyRef(key), node, code, errOut)
		}
	}
}
