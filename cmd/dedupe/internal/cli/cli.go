package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/user"
	"strings"
	"time"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/dynamostore"
)

// Exit codes of Run.
const (
	// ExitOK: done; for show, the record was found.
	ExitOK = 0
	// ExitError: the store or the input failed (unreachable, denied, a
	// file that does not parse).
	ExitError = 1
	// ExitUsage: bad flags or arguments, including a reference that more
	// than one record shares when the command acts on one.
	ExitUsage = 2
	// ExitNotFound: no live record for the key or reference.
	ExitNotFound = 3
	// ExitRefused: the command or the store refused the change (the
	// owner token no longer matches, the record is in the wrong state or
	// changed since it was read, a lease still running without --force),
	// or the operator did not confirm.
	ExitRefused = 4
)

// Env is what Run reads and writes: the command line without the program
// name, the standard streams and the environment.
type Env struct {
	Args   []string
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	// Getenv reads the environment (os.Getenv).
	Getenv func(string) string
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// CurrentUser names the operating system's user running the command,
	// for the forget log when no --operator, $DEDUPE_OPERATOR, $USER or
	// $LOGNAME names one. Nil means os/user.Current.
	CurrentUser func() (string, error)
}

// exitError carries an exit code through the subcommands.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// fail returns err with exit code code.
func fail(code int, format string, args ...any) error {
	return &exitError{code: code, err: fmt.Errorf(format, args...)}
}

const usage = `usage: dedupe [-o json] [store flags] <command> [flags]

commands:
  key       compute the stored key and its KeyRef from parts or a saved event
  show      print a record: dedupe show key:<12 hex> | --stored-key K | key flags
  inflight  list in-flight records (--stranded: only those whose lease ran out)
  stranded  same as inflight --stranded
  release   end a stuck lease: dedupe release <ref|--stored-key K> --token T [--force]
  forget    delete a completed record: dedupe forget <ref|--stored-key K> --token T --reason WHY [--operator NAME] [--yes]

store flags (every command but key), else from the environment as the
functions read it (DEDUPE_STORE, IDEMPOTENCY_TABLE, REDIS_URL, DATABASE_URL):
  --table NAME      DynamoDB table (--endpoint URL for dynalite, moto, DynamoDB Local;
                    --s3-endpoint URL where show --body reads responses kept in S3)
  --redis URL       Redis or Valkey (--redis-prefix, default "dedupe:")
  --postgres URL    PostgreSQL (--pg-table, default dedupe_records)
  -o text|json      output format (default text)
-o and the store flags may come before the command or after it.

exit codes: 0 ok, 1 error, 2 usage (or a reference two records share),
3 not found, 4 refused or not confirmed (see docs/operating.md)
`

// Run runs the command line in env and returns its exit code.
func Run(ctx context.Context, env Env) int {
	if env.Now == nil {
		env.Now = time.Now
	}
	if env.Getenv == nil {
		env.Getenv = os.Getenv
	}
	if env.CurrentUser == nil {
		env.CurrentUser = func() (string, error) {
			u, err := user.Current()
			if err != nil {
				return "", err
			}
			return u.Username, nil
		}
	}
	if len(env.Args) == 0 || env.Args[0] == "help" || env.Args[0] == "-h" || env.Args[0] == "--help" {
		fmt.Fprint(env.Stderr, usage)
		if len(env.Args) == 0 {
			return ExitUsage
		}
		return ExitOK
	}
	cmds := map[string]func(context.Context, *Env, []string) error{
		"key":      cmdKey,
		"show":     cmdShow,
		"inflight": func(ctx context.Context, env *Env, args []string) error { return cmdInFlight(ctx, env, args, false) },
		"stranded": func(ctx context.Context, env *Env, args []string) error { return cmdInFlight(ctx, env, args, true) },
		"release":  cmdRelease,
		"forget":   cmdForget,
	}
	name, args, err := splitCommand(env.Args)
	if err != nil {
		fmt.Fprintf(env.Stderr, "dedupe: %s\n\n%s", esc(err.Error()), usage)
		return ExitUsage
	}
	cmd, ok := cmds[name]
	if !ok {
		fmt.Fprintf(env.Stderr, "dedupe: unknown command %q\n\n%s", esc(name), usage)
		return ExitUsage
	}
	err = cmd(ctx, &env, args)
	if err == nil {
		return ExitOK
	}
	if errors.Is(err, flag.ErrHelp) {
		return ExitOK
	}
	// Errors quote what stores and servers answered: escaped, like every
	// stored string (see esc).
	fmt.Fprintf(env.Stderr, "dedupe %s: %s\n", name, esc(err.Error()))
	if wrongKeySchema(err) {
		fmt.Fprintf(env.Stderr, "dedupe %s: the table is not keyed as --key-schema (or $DEDUPE_KEY_SCHEMA) says: ref, the default, for a table created since v0.2.0 (keyed by reference, no ref index); classic for one created before (with its ref index)\n", name)
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	return ExitError
}

// globalFlags are the flags that may come before the command: -o and the
// store flags (every flag storeFlags.register adds), each with a value.
// The command then parses them as its own, so one it does not take (the
// store flags of key) is refused there.
var globalFlags = func() map[string]bool {
	fs := flag.NewFlagSet("", flag.ContinueOnError)
	var sf storeFlags
	sf.register(fs)
	m := map[string]bool{"o": true}
	fs.VisitAll(func(f *flag.Flag) {
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			panic("cli: store flag --" + f.Name + " takes no value: splitCommand cannot skip it")
		}
		m[f.Name] = true
	})
	return m
}()

// splitCommand returns the command args name and its arguments: the
// global flags before the command (with their values), then everything
// after it.
func splitCommand(args []string) (string, []string, error) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "-" || !strings.HasPrefix(a, "-") {
			rest := append(append([]string{}, args[:i]...), args[i+1:]...)
			return a, rest, nil
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !globalFlags[name] {
			return "", nil, fmt.Errorf("flag %s before the command: only -o and the store flags may come first; put it after the command", a)
		}
		if !hasValue {
			i++ // the flag's value
		}
	}
	return "", nil, errors.New("no command")
}

// output is the -o flag.
type output struct{ json bool }

func (o *output) String() string {
	if o.json {
		return "json"
	}
	return "text"
}

func (o *output) Set(v string) error {
	switch v {
	case "text":
		o.json = false
	case "json":
		o.json = true
	default:
		return fmt.Errorf("want text or json")
	}
	return nil
}

// newFlags returns a flag set for command name that reports to env.
func newFlags(env *Env, name string) *flag.FlagSet {
	fs := flag.NewFlagSet("dedupe "+name, flag.ContinueOnError)
	fs.SetOutput(textWriter{env.Stderr})
	return fs
}

// parse parses args with fs, interspersed positional arguments allowed
// (dedupe show key:abc -o json), and returns the positional ones.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, &exitError{code: ExitUsage, err: err}
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// writeJSON writes v as indented JSON, escaped for a terminal (escJSON).
func writeJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(escJSON(append(b, '\n')))
	return err
}

// recordView is a record as the command prints it.
type recordView struct {
	Ref            string              `json:"ref"`
	Key            string              `json:"key"`
	Status         string              `json:"status"`
	State          string              `json:"state"`
	Meaning        string              `json:"meaning"`
	Owner          string              `json:"owner"`
	FirstOwner     string              `json:"firstOwner,omitempty"`
	Fingerprint    string              `json:"fingerprint"`
	LeaseExpiresAt *time.Time          `json:"leaseExpiresAt,omitempty"`
	ExpiresAt      time.Time           `json:"expiresAt"`
	CreatedAt      time.Time           `json:"createdAt"`
	UpdatedAt      time.Time           `json:"updatedAt"`
	RequestID      string              `json:"requestId,omitempty"`
	Trace          string              `json:"trace,omitempty"`
	ResultOmitted  bool                `json:"resultOmitted,omitempty"`
	ResponseStatus int                 `json:"responseStatus,omitempty"`
	ResponseBytes  *int                `json:"responseBytes,omitempty"`
	ResponseObject *objectView         `json:"responseObject,omitempty"`
	Headers        map[string][]string `json:"headers,omitempty"`
	Body           []byte              `json:"body,omitempty"`
}

// objectView is the S3 object that holds a response body
// (dynamostore.Object).
type objectView struct {
	Bucket   string `json:"bucket"`
	Name     string `json:"name"`
	Size     int64  `json:"size"`
	Encoding string `json:"encoding,omitempty"`
}

// state names what a record means to the guard at now: a word for
// scripts (completed, omitted, released, stranded, running) and what it
// means for the next request with the key.
func state(r dedupe.Record, now time.Time) (string, string) {
	switch {
	case r.Status == dedupe.StatusCompleted && r.ResultOmitted:
		return "omitted", "completed without its result: duplicates get 409 response unavailable"
	case r.Status == dedupe.StatusCompleted:
		return "completed", "duplicates get the stored response"
	case r.LeaseExpiresAt.UnixMilli() == 0:
		return "released", "a retry of the same request runs again; another request gets 422"
	case r.Stranded(now):
		return "stranded", "lease ran out, owner gone: a retry of the same request takes it over, another gets 422"
	}
	return "running", "lease running: duplicates get 409"
}

// view returns f as printed; headers and body only when withBody (and,
// for a body in S3, only once read: f.object is then nil).
func view(f found, now time.Time, withBody bool) recordView {
	r := f.Record
	st, meaning := state(r, now)
	v := recordView{
		Ref: dedupe.KeyRef(r.Key), Key: r.Key, Status: string(r.Status), State: st, Meaning: meaning,
		Owner: r.Token, Fingerprint: r.Fingerprint,
		ExpiresAt: r.ExpiresAt.UTC(), CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(),
		RequestID: r.RequestID, Trace: r.Trace, ResultOmitted: r.ResultOmitted,
	}
	if r.FirstToken != "" && r.FirstToken != r.Token {
		v.FirstOwner = r.FirstToken
	}
	if r.Status == dedupe.StatusInProgress {
		l := r.LeaseExpiresAt.UTC()
		v.LeaseExpiresAt = &l
	}
	if r.Result != nil {
		v.ResponseStatus = r.Result.StatusCode
		if o := f.object; o != nil {
			v.ResponseObject = &objectView{Bucket: o.Bucket, Name: o.Name, Size: o.Size, Encoding: o.Encoding}
		} else {
			n := len(r.Result.Body)
			v.ResponseBytes = &n
		}
		if withBody {
			v.Headers, v.Body = r.Result.Headers, r.Result.Body
		}
	}
	return v
}

// printRecord writes v for a human, every stored string escaped (esc).
func printRecord(w io.Writer, v recordView) {
	ts := func(t time.Time) string { return t.Format(time.RFC3339Nano) }
	fmt.Fprintf(w, "ref:          %s\n", v.Ref)
	fmt.Fprintf(w, "key:          %s\n", esc(v.Key))
	fmt.Fprintf(w, "status:       %s, %s: %s\n", esc(v.Status), v.State, v.Meaning)
	fmt.Fprintf(w, "owner:        %s\n", esc(v.Owner))
	if v.FirstOwner != "" {
		fmt.Fprintf(w, "first owner:  %s (taken over)\n", esc(v.FirstOwner))
	}
	if v.LeaseExpiresAt != nil {
		fmt.Fprintf(w, "lease until:  %s\n", ts(*v.LeaseExpiresAt))
	}
	fmt.Fprintf(w, "expires:      %s\n", ts(v.ExpiresAt))
	fmt.Fprintf(w, "fingerprint:  %s\n", esc(v.Fingerprint))
	fmt.Fprintf(w, "created:      %s\n", ts(v.CreatedAt))
	fmt.Fprintf(w, "updated:      %s\n", ts(v.UpdatedAt))
	rid := esc(v.RequestID)
	if rid == "" {
		rid = "- (none stored: outside Lambda, or written before request IDs were stored)"
	}
	fmt.Fprintf(w, "request id:   %s\n", rid)
	if v.Trace != "" {
		fmt.Fprintf(w, "trace:        %s\n", esc(v.Trace))
	}
	switch o := v.ResponseObject; {
	case v.ResultOmitted:
		fmt.Fprintf(w, "response:     omitted (too large to store)\n")
	case o != nil:
		enc := o.Encoding
		if enc == "" {
			enc = dynamostore.EncodingIdentity
		}
		fmt.Fprintf(w, "response:     %d, body in S3: s3://%s/%s, %d bytes stored (%s)\n",
			v.ResponseStatus, esc(o.Bucket), esc(o.Name), o.Size, esc(enc))
	case v.ResponseBytes != nil:
		fmt.Fprintf(w, "response:     %d, %d bytes\n", v.ResponseStatus, *v.ResponseBytes)
	}
}

// operator returns who runs the command, for the forget log: flag (the
// --operator flag), else $DEDUPE_OPERATOR, $USER or $LOGNAME, else the
// operating system's user; "" when nothing names one.
func operator(env *Env, flag string) string {
	if v := strings.TrimSpace(flag); v != "" {
		return v
	}
	for _, k := range []string{"DEDUPE_OPERATOR", "USER", "LOGNAME"} {
		if v := strings.TrimSpace(env.Getenv(k)); v != "" {
			return v
		}
	}
	if name, err := env.CurrentUser(); err == nil {
		return strings.TrimSpace(name)
	}
	return ""
}
