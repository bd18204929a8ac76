package dedupe_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/memstore"
)

// secret41 marks every value of the events below, so that a test can
// tell whether an error echoes one.
const secret41 = "SECRET41"

// ev41 is an order event whose id and amount are given.
func ev41(id string, amount int) map[string]any {
	return map[string]any{"id": secret41 + id, "amount": amount, "items": []any{map[string]any{"x": secret41 + id}}}
}

// run41 builds a Handler of map events with cfg and calls it with each
// event in turn. It returns the construction error, or how many times h
// ran and each call's error.
func run41(t *testing.T, cfg *dedupe.HandlerConfig[string], evs ...map[string]any) (runs int, errs []error, cerr error) {
	t.Helper()
	g := dedupe.New(memstore.New(), &dedupe.Config{Prefix: "attack41", Logger: discardLogger()})
	h, err := dedupe.Handler(g, cfg, func(_ context.Context, ev map[string]any) (string, error) {
		runs++
		return "answer for " + ev["id"].(string), nil
	})
	if err != nil {
		return 0, nil, err
	}
	for _, ev := range evs {
		got, err := h(context.Background(), ev)
		if err == nil && got != "answer for "+ev["id"].(string) {
			t.Errorf("Key %q: event %v was answered %q: another request's answer", cfg.Key, ev["id"], got)
		}
		errs = append(errs, err)
	}
	return runs, errs, nil
}

// TestAttack41KeyPickedFromMixedContainer states invariant 1: two events
// that differ in the field the Key reads never share a stored key. A
// literal picked back out of a list, object or merge that also holds a
// field (['v1', id][0], {k: 'v1', i: id}.k, a default merged under the
// event) is a value made of literals alone, and must be refused with
// ErrNoKey as 'v1' || id is; Handler accepts it, and every event is
// answered with the first one's result.
func TestAttack41KeyPickedFromMixedContainer(t *testing.T) {
	for _, key := range []string{
		"['v1', id][0]",
		"[id, 'v1'][-1]",
		"{k: 'v1', i: id}.k",
		"merge({tenant: 'default'}, @).tenant", // a literal default, as tenant || 'default'
		"values({a: 'v1', b: id})[0]",
		"zip(['v1'], [id])[0][0]",
		"not_null(nope, ['v1', id][0])",
		"['v1', id][:1]",
		"['v1', id][?@ == 'v1']",
	} {
		runs, errs, err := run41(t, &dedupe.HandlerConfig[string]{Key: key, Scope: "'orders'", Fingerprint: "amount"},
			ev41("a", 10), ev41("b", 10))
		if err != nil {
			continue // refused at construction: no collision
		}
		for i, err := range errs {
			if err != nil && !errors.Is(err, dedupe.ErrNoKey) {
				t.Errorf("Key %q: event %d: %v, want ErrNoKey or a run", key, i, err)
			}
		}
		if errs[0] == nil && errs[1] == nil && runs != 2 {
			t.Errorf("Key %q: two different orders ran %d time(s): the second was replayed the first's answer", key, runs)
		}
	}
}

// TestAttack41KeyFromExprefOverLiterals states invariant 1 for
// expression references: map(&@, ['v1']) is made of literals alone (the
// elements it visits are literals), so id && map(&@, ['v1']) is as
// constant as id && ['v1'], which is refused; it must be refused too.
func TestAttack41KeyFromExprefOverLiterals(t *testing.T) {
	for _, key := range []string{
		"id && map(&@, ['v1'])",
		"id && map(&to_string(@), [`1`])",
		"id && sort_by(['b', 'a'], &@)",
	} {
		runs, errs, err := run41(t, &dedupe.HandlerConfig[string]{Key: key, Scope: "'orders'", Fingerprint: "amount"},
			ev41("a", 10), ev41("b", 10))
		if err != nil {
			continue
		}
		if errs[0] == nil && errs[1] == nil && runs != 2 {
			t.Errorf("Key %q: two different orders ran %d time(s): the second was replayed the first's answer", key, runs)
		}
	}
}

// TestAttack41FingerprintPickedFromMixedContainer states invariant 3: a
// Fingerprint made of literals alone is refused, so a key reused with a
// different body is never answered with the first body's result. A
// literal picked out of a list or object that also holds a field is
// made of literals alone; Handler accepts it and replays.
func TestAttack41FingerprintPickedFromMixedContainer(t *testing.T) {
	for _, fp := range []string{"['v1', amount][0]", "{v: 'v1', a: amount}.v", "merge(@, {v: 'v1'}).v", "merge({currency: 'EUR'}, @).currency"} {
		runs, errs, err := run41(t, &dedupe.HandlerConfig[string]{Key: "id", Scope: "'orders'", Fingerprint: fp},
			ev41("a", 10), ev41("a", 99))
		if err != nil {
			continue
		}
		if errs[0] == nil && errs[1] == nil {
			t.Errorf("Fingerprint %q: the same key with amount 10 then 99 was replayed (%d run): want ErrNoFingerprint or ErrFingerprintMismatch", fp, runs)
		}
	}
}

// TestAttack41KeyBooleanAsString states invariant 1 for the refusal of
// boolean keys ("two keys for all events", docs/powertools.md): the same
// two keys spelled as strings, to_string(id == 'x') or to_string(!id),
// are the key of every event that gives the same answer, and must be
// refused as the boolean is. (Weaker cousins that read only the event's
// shape, length(items), type(id), keys(@), are noted in the report, not
// pinned here.)
func TestAttack41KeyBooleanAsString(t *testing.T) {
	for _, key := range []string{"to_string(!id)", "to_string(id == 'x')", "join('', [to_string(starts_with(id, 'x'))])"} {
		runs, errs, err := run41(t, &dedupe.HandlerConfig[string]{Key: key, Scope: "'orders'", Fingerprint: "amount"},
			ev41("a", 10), ev41("b", 10))
		if err != nil {
			continue
		}
		if errs[0] == nil && errs[1] == nil && runs != 2 {
			t.Errorf("Key %q: two different orders ran %d time(s): the second was replayed the first's answer", key, runs)
		}
	}
}

// TestAttack41LiteralKeysRefused states invariant 1 where it holds: a key
// made of literals that the event merely chooses between, however it is
// written, is refused (at construction when it reads nothing of the
// event, else per event with ErrNoKey), h never runs, and the error
// names the expression, never an event value (invariant 5).
func TestAttack41LiteralKeysRefused(t *testing.T) {
	for _, key := range []string{
		"id | 'v1'", "let $x = 'v1' in $x", "let $x = @ in 'v1'", "`[\"v1\"]`[?$.id]",
		"id && 'v1'", "'v1' || id", "not_null('v1', id)", "not_null(nope, 'v1')", "id[0:0] || 'v1'",
		"nope || 'v1'", "id && ['a', 'b']", "id && `{\"a\": \"v1\"}`.a", "id && ['a', 'b'][0:1]",
		"id && to_array('v1')", "id && abs(`1`)", "id && `1` + `2`", "id && reverse(['a', 'b'])",
		"id && sort(['b', 'a'])", "id && join('-', ['a', 'b'])", "to_array('v1')", "abs(`1`)", "`1` + `2`",
		"sort(['b', 'a'])", "['v1', 'v2'][0:1]", "max_by([{k: 'v1'}], &k).k", "items[?x == 'a'] | `\"lit\"`",
	} {
		runs, errs, err := run41(t, &dedupe.HandlerConfig[string]{Key: key, Scope: "'orders'"}, ev41("a", 10), ev41("b", 10))
		if err != nil {
			if strings.Contains(err.Error(), secret41) {
				t.Errorf("Key %q: construction error echoes an event value: %v", key, err)
			}
			continue
		}
		for i, err := range errs {
			if !errors.Is(err, dedupe.ErrNoKey) {
				t.Errorf("Key %q: event %d: %v, want ErrNoKey", key, i, err)
			} else if strings.Contains(err.Error(), secret41) || !strings.Contains(err.Error(), strconv.Quote(key)) {
				t.Errorf("Key %q: error %q echoes an event value or does not name the expression", key, err)
			}
		}
		if runs != 0 {
			t.Errorf("Key %q: h ran %d time(s)", key, runs)
		}
	}
}

// TestAttack41LiteralBesideFieldIsKey states invariant 2: a literal beside
// a field, a literal default combined with fields, and a literal Scope
// are legitimate: two different orders both run, a duplicate is
// replayed.
func TestAttack41LiteralBesideFieldIsKey(t *testing.T) {
	for _, key := range []string{
		"['v1', id]", "join('-', ['v1', id])", "[id, 'v1']", "id || alt", "not_null(nope, id, 'v1')",
		"not_null(id, 'v1')", "id && [id, 'v1']", "[amount, id]", "join('', [id, to_string(amount)])", "id | [@, 'v1']",
		"let $v = 'v1' in [$v, id]", "items[?x != 'none'].x", "map(&join('-', ['v1', x]), items)",
	} {
		runs, errs, err := run41(t, &dedupe.HandlerConfig[string]{Key: key, Scope: "'orders'"}, ev41("a", 10), ev41("b", 10), ev41("a", 10))
		if err != nil {
			t.Errorf("Key %q refused at construction: %v", key, err)
			continue
		}
		for i, err := range errs {
			if err != nil {
				t.Errorf("Key %q: event %d: %v", key, i, err)
			}
		}
		if runs != 2 {
			t.Errorf("Key %q: h ran %d times for two orders and a duplicate, want 2", key, runs)
		}
	}
}

// TestAttack41LiteralKeyEventTypes states invariant 2 for the event types
// Handler accepts: a key of a literal beside a field is accepted for
// each, and a key made of literals alone is refused per event.
func TestAttack41LiteralKeyEventTypes(t *testing.T) {
	ctx := context.Background()
	var eb events.EventBridgeEvent
	fixture(t, "eventbridge-event.json", &eb)
	eb2 := eb
	eb2.ID = eb.ID + "-2"
	sns := func(id string) events.SNSEvent {
		return events.SNSEvent{Records: []events.SNSEventRecord{{SNS: events.SNSEntity{MessageID: id, TopicArn: "arn:aws:sns:eu-west-1:1:t", Message: "m"}}}}
	}
	s3 := func(key string) events.S3Event {
		return events.S3Event{Records: []events.S3EventRecord{{S3: events.S3Entity{Bucket: events.S3Bucket{Arn: "arn:aws:s3:::b"}, Object: events.S3Object{Key: key}}}}}
	}
	check := func(name string, cerr error, calls ...func() error) {
		t.Helper()
		if cerr != nil {
			t.Errorf("%s: refused at construction: %v", name, cerr)
			return
		}
		for i, call := range calls {
			if err := call(); err != nil {
				t.Errorf("%s: event %d: %v", name, i, err)
			}
		}
	}
	refused := func(name string, cerr error, call func() error) {
		t.Helper()
		if cerr != nil {
			t.Errorf("%s: refused at construction: %v", name, cerr)
			return
		}
		if err := call(); !errors.Is(err, dedupe.ErrNoKey) {
			t.Errorf("%s: %v, want ErrNoKey", name, err)
		}
	}
	g := dedupe.New(memstore.New(), &dedupe.Config{Prefix: "types41", Logger: discardLogger()})
	runs := 0
	count := func() { runs++ }
	for _, key := range []string{"['v1', id]", "id && 'v1'"} {
		h, err := dedupe.Handler(g, &dedupe.HandlerConfig[string]{Key: key}, func(_ context.Context, e events.EventBridgeEvent) (string, error) { count(); return e.ID, nil })
		call := func(e events.EventBridgeEvent) func() error { return func() error { _, err := h(ctx, e); return err } }
		if key == "id && 'v1'" {
			refused("EventBridge "+key, err, call(eb))
		} else {
			check("EventBridge "+key, err, call(eb), call(eb2))
		}
	}
	for _, key := range []string{"['v1', Records[0].Sns.MessageId]", "Records[0].Sns.MessageId && 'v1'"} {
		h, err := dedupe.Handler(g, &dedupe.HandlerConfig[string]{Key: key, Scope: "'notifications'"}, func(_ context.Context, e events.SNSEvent) (string, error) { count(); return "", nil })
		call := func(e events.SNSEvent) func() error { return func() error { _, err := h(ctx, e); return err } }
		if strings.Contains(key, "&&") {
			refused("SNS "+key, err, call(sns("m-1")))
		} else {
			check("SNS "+key, err, call(sns("m-1")), call(sns("m-2")))
		}
	}
	for _, key := range []string{"join('/', ['v1', Records[0].s3.object.key])", "Records[0].s3.object.key && 'v1'"} {
		h, err := dedupe.Handler(g, &dedupe.HandlerConfig[string]{Key: key, Scope: "Records[0].s3.bucket.arn"}, func(_ context.Context, e events.S3Event) (string, error) { count(); return "", nil })
		call := func(e events.S3Event) func() error { return func() error { _, err := h(ctx, e); return err } }
		if strings.Contains(key, "&&") {
			refused("S3 "+key, err, call(s3("a.txt")))
		} else {
			check("S3 "+key, err, call(s3("a.txt")), call(s3("b.txt")))
		}
	}
	for _, key := range []string{"['v1', id]", "id && 'v1'"} {
		h, err := dedupe.Handler(g, &dedupe.HandlerConfig[string]{Key: key, Scope: "tenant"}, func(_ context.Context, o order) (string, error) { count(); return "", nil })
		call := func(o order) func() error { return func() error { _, err := h(ctx, o); return err } }
		if strings.Contains(key, "&&") {
			refused("order "+key, err, call(order{"acme", "o-1", 1}))
		} else {
			check("order "+key, err, call(order{"acme", "o-1", 1}), call(order{"acme", "o-2", 1}))
		}
	}
	for _, key := range []string{"['v1', id]", "id && 'v1'"} {
		h, err := dedupe.Handler(g, &dedupe.HandlerConfig[string]{Key: key, Scope: "'raw'"}, func(_ context.Context, m json.RawMessage) (string, error) { count(); return "", nil })
		call := func(m string) func() error { return func() error { _, err := h(ctx, json.RawMessage(m)); return err } }
		if strings.Contains(key, "&&") {
			refused("raw "+key, err, call(`{"id":"r-1"}`))
		} else {
			check("raw "+key, err, call(`{"id":"r-1"}`), call(`{"id":"r-2"}`))
		}
	}
	if runs != 10 {
		t.Errorf("h ran %d times, want 10 (two different events of each of five types)", runs)
	}
}

// TestAttack41ScopeAndKey states invariant 4: the scope is not the key. A
// literal Scope with a field Key keys by the field; a field Scope with a
// key made of literals alone is refused (at construction or per event);
// a Scope that selects a missing value refuses the event.
func TestAttack41ScopeAndKey(t *testing.T) {
	withTenant := func(tenant, id string) map[string]any {
		ev := ev41(id, 1)
		if tenant != "" {
			ev["tenant"] = tenant
		}
		return ev
	}
	runs, errs, err := run41(t, &dedupe.HandlerConfig[string]{Key: "id", Scope: "'orders'"}, withTenant("", "a"), withTenant("", "b"))
	if err != nil || errs[0] != nil || errs[1] != nil || runs != 2 {
		t.Errorf("literal Scope, field Key: %v %v after %d runs, want two runs", err, errs, runs)
	}
	for _, key := range []string{"'v1'", "tenant && 'v1'", "id && 'v1'", "not_null('v1', id)"} {
		runs, errs, err := run41(t, &dedupe.HandlerConfig[string]{Key: key, Scope: "tenant"}, withTenant("acme", "a"), withTenant("acme", "b"))
		if err != nil {
			continue
		}
		for i, err := range errs {
			if !errors.Is(err, dedupe.ErrNoKey) {
				t.Errorf("Scope tenant, Key %q: event %d: %v, want ErrNoKey", key, i, err)
			}
		}
		if runs != 0 {
			t.Errorf("Scope tenant, Key %q: h ran %d times", key, runs)
		}
	}
	for _, scope := range []string{"tenant", "[tenant, 'orders']", "tenant || 'default'", "not_null(tenant, 'default')"} {
		runs, errs, err := run41(t, &dedupe.HandlerConfig[string]{Key: "id", Scope: scope}, withTenant("", "a"))
		if err != nil {
			t.Errorf("Scope %q refused at construction: %v", scope, err)
			continue
		}
		if !errors.Is(errs[0], dedupe.ErrNoKey) || runs != 0 || strings.Contains(errs[0].Error(), secret41) {
			t.Errorf("Scope %q of an event without tenant: %v after %d runs, want ErrNoKey naming no value", scope, errs[0], runs)
		}
	}
}

// TestAttack41Fingerprints states invariant 3 where it holds: a
// fingerprint made of literals alone is refused, and one of a literal
// beside a field tells two bodies apart (ErrFingerprintMismatch, never a
// replay).
func TestAttack41Fingerprints(t *testing.T) {
	for _, fp := range []string{"amount && 'x'", "'x'", "['a', 'b']", "id | 'x'", "`{\"a\": 1}`", "amount && {a: 'x'}"} {
		runs, errs, err := run41(t, &dedupe.HandlerConfig[string]{Key: "id", Scope: "'orders'", Fingerprint: fp}, ev41("a", 10))
		if err != nil {
			continue
		}
		if !errors.Is(errs[0], dedupe.ErrNoFingerprint) || runs != 0 || strings.Contains(errs[0].Error(), secret41) {
			t.Errorf("Fingerprint %q: %v after %d runs, want ErrNoFingerprint naming no value", fp, errs[0], runs)
		}
	}
	for _, fp := range []string{"['v1', amount]", "{v: 'v1', a: amount}", "join('-', ['v1', to_string(amount)])", "amount && [amount, 'v1']"} {
		runs, errs, err := run41(t, &dedupe.HandlerConfig[string]{Key: "id", Scope: "'orders'", Fingerprint: fp}, ev41("a", 10), ev41("a", 99), ev41("a", 10))
		if err != nil {
			t.Errorf("Fingerprint %q refused at construction: %v", fp, err)
			continue
		}
		if errs[0] != nil || !errors.Is(errs[1], dedupe.ErrFingerprintMismatch) || errs[2] != nil || runs != 1 {
			t.Errorf("Fingerprint %q: %v after %d runs, want a run, ErrFingerprintMismatch, a replay", fp, errs, runs)
		}
	}
}

// TestAttack41PickFromMixedIsRefusedLoudly states the conservative side
// of the mixed-container rule: dedupe does not track which part of a
// list or object mixing literals with fields a pick took, so a pick of
// the field is refused too, per event with ErrNoKey, and the error says
// why and what to write instead; the same field selected plainly, or
// picked from a container of fields alone, is a key.
func TestAttack41PickFromMixedIsRefusedLoudly(t *testing.T) {
	for _, key := range []string{"{v: 'v1', i: id}.i", "merge(@, {v: 'v1'}).id", "[id, 'v1'][0]"} {
		runs, errs, err := run41(t, &dedupe.HandlerConfig[string]{Key: key, Scope: "'orders'"}, ev41("a", 10))
		if err != nil {
			t.Errorf("Key %q refused at construction (%v); want it refused per event", key, err)
			continue
		}
		if runs != 0 || !errors.Is(errs[0], dedupe.ErrNoKey) || !strings.Contains(errs[0].Error(), "mixes literals with fields") ||
			!strings.Contains(errs[0].Error(), "select a field of the event") {
			t.Errorf("Key %q: %d runs, %v; want ErrNoKey naming the mix and the fix", key, runs, errs[0])
		}
	}
	for _, key := range []string{"id", "{i: id}.i", "[id, amount][0]", "merge(@, {k: amount}).id"} {
		runs, errs, err := run41(t, &dedupe.HandlerConfig[string]{Key: key, Scope: "'orders'"}, ev41("a", 10), ev41("b", 10))
		if err != nil || errs[0] != nil || errs[1] != nil || runs != 2 {
			t.Errorf("Key %q: %v, %v, %d runs; want a key for each order", key, err, errs, runs)
		}
	}
}

// TestAttack41RefusalSaysWhy states that each refusal of a key that
// every event (or every event with as many items) would share says which
// of the two it is, so that the user knows what to change: a literal, or
// a pick out of a mix of literals and fields (by a filter, an expression
// reference or max), is refused as literal; a value computed from
// comparisons alone, element by element included, as a few values.
func TestAttack41RefusalSaysWhy(t *testing.T) {
	for _, tt := range []struct{ key, want string }{
		{"['v1', id][?@ == 'v1']", "mixes literals with fields"},
		{"id && map(&@, ['v1'])", "selected a value made of literals alone"},
		{"max(['v1', id])", "mixes literals with fields"},
		{"min(['v1', id])", "mixes literals with fields"},
		{"min_by([{v: 'v1'}, {v: id}], &v).v", "mixes literals with fields"},
		{"to_string(min_by([{v: 'v1'}, {v: id}], &v))", "mixes literals with fields"},
		{"to_string(max_by([{v: 'v1'}, {v: id}], &v))", "mixes literals with fields"},
		{"[['v1', id][0], to_string(!id)]", "comparisons and literals alone"},
		{"map(&to_string(@), [id == 'x'])", "comparisons and literals alone"},
		{"id && to_string(!id)", "comparisons and literals alone"},
		{"{a: to_string(!id)}.a", "comparisons and literals alone"},
		{"to_string(!id)", "comparisons and literals alone"},
		{"items[*].to_string(x == 'a')", "comparisons and literals alone"},
		{"[to_string(!id), 'v1'][0]", "mixes literals with fields"},
	} {
		ev := ev41("a", 10)
		runs, errs, err := run41(t, &dedupe.HandlerConfig[string]{Key: tt.key, Scope: "'orders'"}, ev)
		if err != nil {
			t.Errorf("Key %q refused at construction (%v); want it refused per event", tt.key, err)
			continue
		}
		if runs != 0 || !errors.Is(errs[0], dedupe.ErrNoKey) || !strings.Contains(errs[0].Error(), tt.want) {
			t.Errorf("Key %q: %d runs, %v; want ErrNoKey saying %q", tt.key, runs, errs[0], tt.want)
		}
	}
}
