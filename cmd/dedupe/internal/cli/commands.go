package cli

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/dynamostore"
)

// keyFlags are the flags from which key and show compute a stored key.
type keyFlags struct {
	prefix, storedKey                string
	noPrefix                         bool
	api, route, principal, clientKey string
	shared                           bool
	event, eventType, keyHeader      string
	albAuth                          string
	set                              map[string]bool
}

func (k *keyFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&k.storedKey, "stored-key", "", "the stored key itself, as show prints it (escaped), or raw (as -o json holds it)")
	fs.StringVar(&k.prefix, "prefix", "", "the guard's prefix: the Lambda function's name (Config.Prefix; default $AWS_LAMBDA_FUNCTION_NAME)")
	fs.BoolVar(&k.noPrefix, "no-prefix", false, "the guard has no prefix")
	fs.StringVar(&k.api, "api", "", `deployment scope: "http:<api id>/<stage>", "rest:<api id>/<stage>", "url:<domain>" or "alb:<target group ARN>"`)
	fs.StringVar(&k.route, "route", "", `route, e.g. "POST /payments"`)
	fs.StringVar(&k.principal, "principal", "", `caller identity as DefaultPrincipal returns it, e.g. "jwt:<issuer>|<sub>"`)
	fs.BoolVar(&k.shared, "shared", false, "no principal: the shared scope (HTTPConfig.SharedScope)")
	fs.StringVar(&k.clientKey, "key", "", "the client's Idempotency-Key, as sent")
	fs.StringVar(&k.event, "event", "", "a saved event JSON (HTTP API 2.0, REST API, Function URL or ALB); - reads stdin")
	fs.StringVar(&k.eventType, "event-type", "", "http (payload 2.0), rest, url or alb; default: detected")
	fs.StringVar(&k.albAuth, "alb-auth", "", "ALB events: the load balancer ARN whose signed user claims name the caller (HTTPConfig.ALBAuth); the token is not verified")
	fs.StringVar(&k.keyHeader, "key-header", "", "the header that carries the key (HTTPConfig.KeyHeader; default Idempotency-Key)")
}

// given reports whether any flag that computes a key was set.
func (k *keyFlags) given(fs *flag.FlagSet) bool {
	any := false
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "stored-key", "api", "route", "principal", "shared", "key", "event":
			any = true
		}
	})
	return any
}

// keyInfo is what key prints.
type keyInfo struct {
	StoredKey string `json:"storedKey"`
	Ref       string `json:"ref"`
	Prefix    string `json:"prefix,omitempty"`
	Scoped    string `json:"scopedKey,omitempty"`
	API       string `json:"api,omitempty"`
	Route     string `json:"route,omitempty"`
	Principal string `json:"principal,omitempty"`
	ClientKey string `json:"clientKey,omitempty"`
}

// compute returns the stored key the flags describe, with the adapters'
// own functions (dedupe.KeyOfEvent, dedupe.ScopeKey, dedupe.StoreKey).
func (k *keyFlags) compute(env *Env) (keyInfo, error) {
	if k.storedKey != "" {
		return keyInfo{StoredKey: k.storedKey, Ref: dedupe.KeyRef(k.storedKey)}, nil
	}
	prefix := k.prefix
	switch {
	case k.noPrefix && prefix != "":
		return keyInfo{}, fail(ExitUsage, "--prefix and --no-prefix together")
	case k.noPrefix:
	case prefix == "":
		if prefix = env.Getenv("AWS_LAMBDA_FUNCTION_NAME"); prefix == "" {
			return keyInfo{}, fail(ExitUsage, "--prefix is required: the guard's Config.Prefix, by default the Lambda function's name (or --no-prefix)")
		}
	}
	var info keyInfo
	if k.event != "" {
		ev, err := k.readEvent(env)
		if err != nil {
			return keyInfo{}, err
		}
		var cfg dedupe.HTTPConfig
		cfg.KeyHeader = k.keyHeader
		cfg.SharedScope = k.shared
		if k.albAuth != "" {
			if _, ok := ev.(*events.ALBTargetGroupRequest); !ok {
				return keyInfo{}, fail(ExitUsage, "--alb-auth applies to ALB events only")
			}
			cfg.ALBAuth = &dedupe.ALBAuth{LoadBalancerARN: k.albAuth, PublicKey: noKeys}
		}
		ek, err := dedupe.KeyOfEvent(&cfg, ev)
		if err != nil {
			return keyInfo{}, fail(ExitError, "%w", err)
		}
		info = keyInfo{Scoped: ek.Scoped, API: ek.API, Route: ek.Route, Principal: ek.Principal, ClientKey: ek.ClientKey}
	} else {
		missing := []string{}
		for name, v := range map[string]string{"--api": k.api, "--route": k.route, "--key": k.clientKey} {
			if v == "" {
				missing = append(missing, name)
			}
		}
		if k.principal == "" && !k.shared {
			missing = append(missing, "--principal (or --shared)")
		}
		if len(missing) > 0 {
			return keyInfo{}, fail(ExitUsage, "to compute a key from its parts, set %s; or pass --event or --stored-key", strings.Join(missing, ", "))
		}
		ck, err := dedupe.ParseKey(k.clientKey)
		if err != nil {
			return keyInfo{}, fail(ExitUsage, "--key: %w", err)
		}
		info = keyInfo{API: k.api, Route: k.route, Principal: k.principal, ClientKey: ck,
			Scoped: dedupe.ScopeKey(k.api, k.route, k.principal, ck)}
	}
	info.Prefix = prefix
	info.StoredKey = dedupe.StoreKey(prefix, info.Scoped)
	info.Ref = dedupe.KeyRef(info.StoredKey)
	return info, nil
}

// noKeys is the key source of --alb-auth: KeyOfEvent never verifies a
// token, so no key is ever fetched.
func noKeys(context.Context, string) (*ecdsa.PublicKey, error) { return nil, nil }

// readEvent reads and decodes --event.
func (k *keyFlags) readEvent(env *Env) (any, error) {
	var data []byte
	var err error
	if k.event == "-" {
		var b strings.Builder
		_, err = bufio.NewReader(env.Stdin).WriteTo(&b)
		data = []byte(b.String())
	} else {
		data, err = os.ReadFile(k.event)
	}
	if err != nil {
		return nil, fmt.Errorf("--event: %w", err)
	}
	typ := k.eventType
	if typ == "" {
		var probe struct {
			HTTPMethod     string `json:"httpMethod"`
			RequestContext struct {
				APIID      string `json:"apiId"`
				DomainName string `json:"domainName"`
				ELB        *struct {
					TargetGroupArn string `json:"targetGroupArn"`
				} `json:"elb"`
			} `json:"requestContext"`
		}
		if err := json.Unmarshal(data, &probe); err != nil {
			return nil, fail(ExitError, "--event: %w", err)
		}
		switch {
		case probe.RequestContext.ELB != nil: // ALB events also have httpMethod
			typ = "alb"
		case probe.HTTPMethod != "":
			typ = "rest"
		case strings.Contains(probe.RequestContext.DomainName, ".lambda-url."):
			typ = "url"
		case probe.RequestContext.APIID != "":
			typ = "http"
		default:
			return nil, fail(ExitUsage, "--event: cannot tell the event's type; set --event-type http, rest, url or alb")
		}
	}
	var ev any
	switch typ {
	case "http":
		var e events.APIGatewayV2HTTPRequest
		err, ev = json.Unmarshal(data, &e), &e
	case "rest":
		var e events.APIGatewayProxyRequest
		err, ev = json.Unmarshal(data, &e), &e
	case "url":
		var e events.LambdaFunctionURLRequest
		err, ev = json.Unmarshal(data, &e), &e
	case "alb":
		var e events.ALBTargetGroupRequest
		err, ev = json.Unmarshal(data, &e), &e
	default:
		return nil, fail(ExitUsage, "--event-type %q: want http, rest, url or alb", typ)
	}
	if err != nil {
		return nil, fail(ExitError, "--event: %w", err)
	}
	return ev, nil
}

func cmdKey(_ context.Context, env *Env, args []string) error {
	fs := newFlags(env, "key")
	var k keyFlags
	var out output
	k.register(fs)
	fs.Var(&out, "o", "output: text or json")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fail(ExitUsage, "unexpected argument %q", pos[0])
	}
	info, err := k.compute(env)
	if err != nil {
		return err
	}
	if out.json {
		return writeJSON(env.Stdout, info)
	}
	fmt.Fprintf(env.Stdout, "ref:         %s\nstored key:  %s\n", info.Ref, esc(info.StoredKey))
	if info.Scoped != "" {
		fmt.Fprintf(env.Stdout, "prefix:      %s\napi:         %s\nroute:       %s\nprincipal:   %s\nclient key:  %s\n",
			esc(info.Prefix), esc(info.API), esc(info.Route), orDash(info.Principal), esc(info.ClientKey))
	}
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "- (shared scope)"
	}
	return esc(s)
}

// target is a record named on the command line: a ref, or key flags.
type target struct {
	ref string
	key string
	// alt is the key that --stored-key names as show prints keys
	// (unesc), when that differs from the value as typed (key): find
	// looks both up.
	alt string
}

// resolveTarget reads the record's name from a positional ref or the
// key flags.
func resolveTarget(env *Env, fs *flag.FlagSet, k *keyFlags, pos []string) (target, error) {
	switch {
	case len(pos) > 1:
		return target{}, fail(ExitUsage, "unexpected argument %q", pos[1])
	case len(pos) == 1 && k.given(fs):
		return target{}, fail(ExitUsage, "name the record once: a ref, or key flags")
	case len(pos) == 1:
		ref := strings.TrimSpace(pos[0])
		if !dedupe.ValidRef(ref) {
			return target{}, fail(ExitUsage, "%q is not a ref (key: and 12 hex digits, as the logs print it)", pos[0])
		}
		return target{ref: ref}, nil
	case !k.given(fs):
		return target{}, fail(ExitUsage, "name the record: a ref from a log line (key:…), --stored-key, or the key flags of dedupe key")
	}
	info, err := k.compute(env)
	if err != nil {
		return target{}, err
	}
	t := target{ref: info.Ref, key: info.StoredKey}
	if k.storedKey != "" {
		if u, ok := unesc(k.storedKey); ok && u != k.storedKey {
			t.alt = u
		}
	}
	return t, nil
}

// found is a record as the command found it: on DynamoDB read with
// Inspect, so that a response body kept in S3 is named (object), not
// read.
type found struct {
	dedupe.Record
	object *dynamostore.Object
	// bodyErr is why a body kept in a body item could not be read: the
	// record's Result then has no body (dynamostore.Inspected.BodyErr).
	bodyErr error
}

// find returns every live record t names: by key with one read, by ref
// through the store's ref index. A --stored-key that show's escaping
// reads as another key (t.alt) is looked up both ways: t then names the
// one found, and a value that names two records is refused.
func find(ctx context.Context, st *opened, t *target, now time.Time) ([]found, error) {
	if t.alt == "" {
		return findKey(ctx, st, *t, now)
	}
	typed, err := findKey(ctx, st, *t, now)
	if err != nil {
		return nil, err
	}
	escaped, err := findKey(ctx, st, target{ref: dedupe.KeyRef(t.alt), key: t.alt}, now)
	switch {
	case err != nil:
		return nil, err
	case len(typed) > 0 && len(escaped) > 0:
		return nil, fail(ExitUsage, "--stored-key names two records: %s as typed, and %s as show prints keys (escaped); name one as show prints it: --stored-key %s (%s), or --stored-key %s (%s)",
			t.ref, dedupe.KeyRef(t.alt), t.key, t.ref, t.alt, dedupe.KeyRef(t.alt))
	case len(escaped) > 0:
		t.key, t.ref = t.alt, dedupe.KeyRef(t.alt)
		return escaped, nil
	}
	return typed, nil
}

// findKey is find for one key or ref.
func findKey(ctx context.Context, st *opened, t target, now time.Time) ([]found, error) {
	if in, ok := st.store.(inspector); ok {
		var recs []dynamostore.Inspected
		if t.key != "" {
			rec, err := in.Inspect(ctx, t.key, now)
			switch {
			case errors.Is(err, dedupe.ErrNotFound):
				return nil, nil
			case err != nil:
				return nil, err
			}
			recs = []dynamostore.Inspected{rec}
		} else {
			var err error
			if recs, err = in.InspectRef(ctx, t.ref, now); err != nil {
				return nil, err
			}
		}
		out := make([]found, len(recs))
		for i, r := range recs {
			out[i] = found{r.Record, r.Object, r.BodyErr}
		}
		return out, nil
	}
	var recs []dedupe.Record
	if t.key != "" {
		rec, err := st.Get(ctx, t.key, now)
		switch {
		case errors.Is(err, dedupe.ErrNotFound):
			return nil, nil
		case err != nil:
			return nil, err
		}
		recs = []dedupe.Record{rec}
	} else {
		var err error
		if recs, err = st.FindRef(ctx, t.ref, now); err != nil {
			return nil, err
		}
	}
	out := make([]found, len(recs))
	for i, r := range recs {
		out[i] = found{Record: r}
	}
	return out, nil
}

// ambiguous returns the refusal of an action on a ref that more than one
// record has: references are 48 bits, so two keys can share one by chance
// in a large table, or by design (see docs/security.md). It names each
// record by its stored key, which --stored-key takes.
func ambiguous(ref string, recs []found, now time.Time) error {
	var b strings.Builder
	for _, r := range recs {
		st, _ := state(r.Record, now)
		fmt.Fprintf(&b, "; --stored-key %s (%s, owner %s, request %s)", r.Key, st, r.Token, orNone(r.RequestID))
	}
	return fail(ExitUsage, "%d records share %s (a collision of 48-bit references: different keys): name the one you mean with its stored key%s",
		len(recs), ref, b.String())
}

// findOne is find for commands that act on one record: it refuses a ref
// that names none or more than one.
func findOne(ctx context.Context, st *opened, t *target, now time.Time) (found, error) {
	recs, err := find(ctx, st, t, now)
	switch {
	case err != nil:
		return found{}, err
	case len(recs) == 0:
		return found{}, fail(ExitNotFound, "no live record for %s", t.ref)
	case len(recs) > 1:
		return found{}, ambiguous(t.ref, recs, now)
	}
	return recs[0], nil
}

// withBody returns f with its response body, read from S3 when the store
// keeps it there (the bucket the record names), checked against the
// record.
func withBody(ctx context.Context, st *opened, f found, now time.Time) (found, error) {
	if f.bodyErr != nil {
		return found{}, fmt.Errorf("read the response body from its body item: %w", f.bodyErr)
	}
	if f.object == nil {
		return f, nil
	}
	if st.readObject == nil {
		return found{}, fmt.Errorf("%s: the response body is in S3, which this store cannot read", dedupe.KeyRef(f.Key))
	}
	rec, err := st.readObject(ctx, f.Key, now, f.object.Bucket)
	switch {
	case errors.Is(err, dedupe.ErrNotFound):
		return found{}, fail(ExitNotFound, "%s is gone since it was read", dedupe.KeyRef(f.Key))
	case err != nil:
		return found{}, fmt.Errorf("read the response body from s3://%s/%s: %w", f.object.Bucket, f.object.Name, err)
	case rec.Token != f.Token || rec.Result == nil:
		return found{}, fail(ExitRefused, "%s changed since it was read; run show again", dedupe.KeyRef(f.Key))
	}
	return found{Record: rec}, nil
}

func cmdShow(ctx context.Context, env *Env, args []string) error {
	fs := newFlags(env, "show")
	var k keyFlags
	var sf storeFlags
	var out output
	var body bool
	k.register(fs)
	sf.register(fs)
	fs.Var(&out, "o", "output: text or json")
	fs.BoolVar(&body, "body", false, "print the stored response: its body, escaped for the terminal (text), or headers and body (json); a body kept in S3 is read from the bucket the record names")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	t, err := resolveTarget(env, fs, &k, pos)
	if err != nil {
		return err
	}
	st, err := sf.open(ctx, env)
	if err != nil {
		return err
	}
	defer st.close()
	now := env.Now()
	recs, err := find(ctx, st, &t, now)
	if err != nil {
		return err
	}
	if len(recs) == 0 {
		hint := ""
		if st.name == "redis" && t.key == "" {
			hint = "; on Redis, only writers with redisstore.Options.RefIndex leave the pointer a ref needs: try --event or the key flags"
		}
		return fail(ExitNotFound, "no live record for %s (never claimed, expired, or forgotten)%s", t.ref, hint)
	}
	if len(recs) > 1 {
		if body {
			return ambiguous(t.ref, recs, now)
		}
		fmt.Fprintf(env.Stderr, "dedupe show: warning: %d records share %s (a collision of 48-bit references: different keys); each is printed with its key: act on one with --stored-key\n",
			len(recs), t.ref)
	}
	if body {
		f, err := withBody(ctx, st, recs[0], now)
		if err != nil {
			return err
		}
		if f.Result == nil {
			_, meaning := state(f.Record, now)
			return fail(ExitNotFound, "%s holds no stored response (%s: %s)", t.ref, f.Status, meaning)
		}
		if !out.json {
			_, err := io.WriteString(env.Stdout, escBody(f.Result.Body))
			return err
		}
		recs[0] = f
	}
	views := make([]recordView, len(recs))
	for i, r := range recs {
		views[i] = view(r, now, body)
	}
	if out.json {
		if len(views) == 1 {
			return writeJSON(env.Stdout, views[0])
		}
		return writeJSON(env.Stdout, views)
	}
	for i, v := range views {
		if i > 0 {
			fmt.Fprintln(env.Stdout)
		}
		printRecord(env.Stdout, v)
	}
	return nil
}

func cmdInFlight(ctx context.Context, env *Env, args []string, strandedOnly bool) error {
	name := "inflight"
	if strandedOnly {
		name = "stranded"
	}
	fs := newFlags(env, name)
	var sf storeFlags
	var out output
	limit := fs.Int("limit", 100, "list at most this many records")
	sf.register(fs)
	fs.Var(&out, "o", "output: text or json")
	if !strandedOnly {
		fs.BoolVar(&strandedOnly, "stranded", false, "only records whose lease has run out")
	}
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fail(ExitUsage, "unexpected argument %q", pos[0])
	}
	if *limit <= 0 {
		return fail(ExitUsage, "--limit %d: want a positive number", *limit)
	}
	st, err := sf.open(ctx, env)
	if err != nil {
		return err
	}
	defer st.close()
	now := env.Now()
	recs, truncated, err := st.InFlight(ctx, now, *limit)
	if errors.Is(err, dynamostore.ErrShardMismatch) {
		return fail(ExitError, "%w; nothing listed: pass --shards (or $DEDUPE_SHARDS) as the functions (dynamostore Options.Shards) and the reaper (REAPER_SHARDS) use", err)
	}
	if err != nil {
		return err
	}
	views := []recordView{}
	for _, r := range recs {
		if !strandedOnly || r.Stranded(now) {
			views = append(views, view(found{Record: r}, now, false))
		}
	}
	if out.json {
		return writeJSON(env.Stdout, struct {
			Records   []recordView `json:"records"`
			Truncated bool         `json:"truncated"`
		}{views, truncated})
	}
	for _, v := range views {
		lease := "-"
		if v.LeaseExpiresAt != nil {
			lease = v.LeaseExpiresAt.Format(time.RFC3339)
		}
		rid := esc(v.RequestID)
		if rid == "" {
			rid = "-"
		}
		fmt.Fprintf(env.Stdout, "%s  %-9s lease %s  owner %s  request %s\n", v.Ref,
			v.State, lease, esc(v.Owner), rid)
	}
	fmt.Fprintf(env.Stderr, "%d record(s)", len(views))
	if truncated {
		fmt.Fprintf(env.Stderr, ", more not listed (raise --limit)")
	}
	fmt.Fprintln(env.Stderr)
	return nil
}

func cmdRelease(ctx context.Context, env *Env, args []string) error {
	fs := newFlags(env, "release")
	var k keyFlags
	var sf storeFlags
	var out output
	token := fs.String("token", "", "the owner token that show prints (required): the release is fenced by it")
	force := fs.Bool("force", false, "release a lease that is still running (the owner may still be running: a retry then runs the function a second time); only when the invocation is known to be dead")
	k.register(fs)
	sf.register(fs)
	fs.Var(&out, "o", "output: text or json")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if *token == "" {
		return fail(ExitUsage, "--token is required: the owner token dedupe show prints")
	}
	t, err := resolveTarget(env, fs, &k, pos)
	if err != nil {
		return err
	}
	st, err := sf.open(ctx, env)
	if err != nil {
		return err
	}
	defer st.close()
	now := env.Now()
	rec, err := findOne(ctx, st, &t, now)
	if err != nil {
		return err
	}
	word, _ := state(rec.Record, now)
	switch {
	case rec.Status != dedupe.StatusInProgress:
		return fail(ExitRefused, "%s is %s: only an in-flight record has a lease to release (dedupe forget lets a completed key run again)", t.ref, rec.Status)
	case rec.Token != *token:
		return fail(ExitRefused, "refused: %s is no longer owned by token %s (finished, released or taken over since); run show again", t.ref, *token)
	case word == "released":
		return fail(ExitRefused, "refused: %s is released already (by the guard, after its function failed, or by an operator): a retry of the same request runs at once; nothing to release", t.ref)
	case word == "running" && !*force:
		return fail(ExitRefused, "refused: %s is running: its owner's lease runs until %s (%s left), so its invocation may still be running, and a release would let a retry run the function a second time beside it. Wait for the lease to run out (the record is then stranded); or, if the invocation is known to be dead (its REPORT line shows a timeout or a crash), release it with --force",
			t.ref, rec.LeaseExpiresAt.UTC().Format(time.RFC3339), rec.LeaseExpiresAt.Sub(now).Round(time.Second))
	case word == "running":
		fmt.Fprintf(env.Stderr, "dedupe release: warning: %s is running (lease until %s): if its invocation is still alive, the next retry runs the function a second time beside it (a second charge). Releasing because of --force.\n",
			t.ref, rec.LeaseExpiresAt.UTC().Format(time.RFC3339))
	}
	if err := st.ReleaseSeen(ctx, rec.Record); err != nil {
		if !errors.Is(err, dedupe.ErrLeaseLost) {
			return err
		}
		// The condition failed. That is also what a retry of this very
		// release meets when its first reply was lost after it was
		// applied, so read the record again and report what it is.
		if now, err := releasedSince(ctx, st, &t, rec.Record, env.Now()); err != nil || !now {
			return fail(ExitRefused, "refused: %s changed since it was read (finished, released, renewed by a heartbeat or taken over); this release changed nothing: run show again", t.ref)
		}
	}
	if out.json {
		return writeJSON(env.Stdout, map[string]string{"ref": t.ref, "released": *token})
	}
	fmt.Fprintf(env.Stdout, "released %s: its lease has ended. A retry of the same request runs again at once; a different request still gets 422 until %s.\n",
		t.ref, rec.ExpiresAt.UTC().Format(time.RFC3339))
	return nil
}

// releasedSince reports whether the record seen is now released with its
// owner unchanged: the state a release leaves, whoever applied it (this
// release, whose reply was lost, or the guard after its function failed).
func releasedSince(ctx context.Context, st *opened, t *target, seen dedupe.Record, now time.Time) (bool, error) {
	cur, err := findOne(ctx, st, t, now)
	if err != nil {
		return false, err
	}
	word, _ := state(cur.Record, now)
	return cur.Key == seen.Key && cur.Status == dedupe.StatusInProgress && cur.Token == seen.Token && word == "released", nil
}

func cmdForget(ctx context.Context, env *Env, args []string) error {
	fs := newFlags(env, "forget")
	var k keyFlags
	var sf storeFlags
	var out output
	token := fs.String("token", "", "the owner token that show prints (required): the delete is fenced by it")
	reason := fs.String("reason", "", "why the key must run again (required; logged)")
	who := fs.String("operator", "", "who forgets the key, for the log (default $DEDUPE_OPERATOR, $USER, $LOGNAME or the system's user; else asked)")
	yes := fs.Bool("yes", false, "do not ask for confirmation")
	k.register(fs)
	sf.register(fs)
	fs.Var(&out, "o", "output: text or json")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	switch {
	case *token == "":
		return fail(ExitUsage, "--token is required: the owner token dedupe show prints")
	case strings.TrimSpace(*reason) == "":
		return fail(ExitUsage, "--reason is required: it is logged with who forgot the key")
	}
	t, err := resolveTarget(env, fs, &k, pos)
	if err != nil {
		return err
	}
	stdin := bufio.NewReader(env.Stdin)
	operator := operator(env, *who)
	if operator == "" {
		if *yes {
			return fail(ExitUsage, "--operator is required: no $DEDUPE_OPERATOR, $USER or $LOGNAME, and the system names no user; the log must say who forgot the key")
		}
		fmt.Fprint(env.Stderr, "Who is forgetting the key (your name, for the log)? ")
		line, _ := stdin.ReadString('\n')
		if operator = strings.TrimSpace(line); operator == "" {
			return fail(ExitRefused, "no operator named; nothing deleted (pass --operator)")
		}
	}
	st, err := sf.open(ctx, env)
	if err != nil {
		return err
	}
	defer st.close()
	now := env.Now()
	rec, err := findOne(ctx, st, &t, now)
	if err != nil {
		return err
	}
	if rec.Status != dedupe.StatusCompleted {
		return fail(ExitRefused, "%s is %s: forget deletes completed records only; end a stuck lease with dedupe release", t.ref, rec.Status)
	}
	status := 0
	if rec.Result != nil {
		status = rec.Result.StatusCode
	}
	if !*yes {
		fmt.Fprintf(env.Stderr, "Forget %s (COMPLETED, response %d, request %s, key %s)? The next request with this key runs the function again. Type yes: ",
			t.ref, status, esc(orNone(rec.RequestID)), esc(rec.Key))
		line, _ := stdin.ReadString('\n')
		if strings.TrimSpace(line) != "yes" {
			return fail(ExitRefused, "not confirmed; nothing deleted")
		}
	}
	log := slog.New(slog.NewJSONHandler(jsonWriter{env.Stderr}, nil))
	// gone: the delete met no record although one was read just before.
	// That is what a retry of this very delete meets when its first
	// reply was lost after it was applied; another forget in between is
	// the other cause. Either way the key runs again, and the log says
	// the delete is not confirmed.
	gone := false
	if err := st.Forget(ctx, rec.Key, *token); err != nil {
		switch {
		case errors.Is(err, dedupe.ErrLeaseLost):
			return fail(ExitRefused, "refused: %s no longer carries token %s (rewritten since); run show again", t.ref, *token)
		case errors.Is(err, dedupe.ErrNotFound):
			gone = true
		default:
			return err
		}
	}
	attrs := []any{"ref", t.ref, "operator", operator, "reason", *reason, "store", st.name,
		"owner", rec.Token, "original_request_id", rec.RequestID, "response_status", status}
	if gone {
		attrs = append(attrs, "confirmed", false)
		fmt.Fprintf(env.Stderr, "dedupe forget: %s was gone when the delete arrived: this delete's reply was lost after it applied, or another forget came first; either way it is forgotten\n", t.ref)
	}
	object := ""
	if o := rec.object; o != nil {
		object = "s3://" + o.Bucket + "/" + o.Name
		attrs = append(attrs, "response_object", object)
	}
	log.Warn("dedupe: forget", attrs...)
	until := rec.ExpiresAt.UTC().Format(time.RFC3339)
	if out.json {
		return writeJSON(env.Stdout, map[string]any{"ref": t.ref, "forgotten": true, "warmCachesMayReplayUntil": until})
	}
	fmt.Fprintf(env.Stdout, "forgot %s: the next request with this key runs again.\n"+
		"Warm environments of a function with Config.Cache may still replay it from memory until %s (the record's expiry), "+
		"or until they are recycled: update the function's configuration to recycle them now.\n", t.ref, until)
	if object != "" {
		fmt.Fprintf(env.Stdout, "Its response body stays in %s, never read again (the name is its claim's own), until the bucket's lifecycle expires it.\n", esc(object))
	}
	return nil
}

// orNone returns a request ID for a message, "none" when the record
// stores none.
func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
