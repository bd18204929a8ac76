package dedupe

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	jmespath "github.com/jmespath-community/go-jmespath"
	"github.com/jmespath-community/go-jmespath/pkg/functions"
	"github.com/jmespath-community/go-jmespath/pkg/parsing"
)

// Errors of expressions over events. (They belong with the sentinels of
// errors.go; they are here while that file is edited elsewhere.)
var (
	// ErrNoKey reports an event from which a key or scope expression
	// selected nothing usable as a key: null, an empty string, a boolean,
	// an object, an empty list, a number that is not a whole number
	// below 2^53, or an error in evaluating it (powertools_json on text
	// that is not JSON). Such an event is refused; it never runs
	// unguarded and never shares a key.
	ErrNoKey = errors.New("dedupe: expression selected no usable key from the event")

	// ErrNoFingerprint reports an event from which a fingerprint
	// expression selected null, or a number too large to compare
	// exactly, or failed. Such an event is refused.
	ErrNoFingerprint = errors.New("dedupe: expression selected nothing to fingerprint from the event")
)

// maxDecodedBytes bounds what powertools_base64_gzip inflates, so that a
// small event cannot expand without limit: 6 MiB, Lambda's largest
// synchronous payload.
const maxDecodedBytes = 6 << 20

// maxExactInt is 2^53: every whole number below it in magnitude has one
// exact float64, so two different ones never compare equal.
const maxExactInt = 1 << 53

// Expr is a JMESPath expression (https://jmespath.org), compiled once,
// that selects a key or the fingerprinted part of an event, as
// Powertools' event_key_jmespath and payload_validation_jmespath do.
// Besides JMESPath's own functions it has Powertools' three:
//
//	powertools_json(s)         the JSON value that the string s holds
//	powertools_base64(s)       the text that the base64 string s encodes
//	powertools_base64_gzip(s)  the text of the gzip data that s encodes
//
// For example powertools_json(body).orderId selects the orderId of an
// API Gateway request's JSON body, and
// powertools_json(powertools_base64(data)).id that of a Kinesis record's.
//
// An Expr is safe for concurrent use.
type Expr struct {
	src string
	jp  jmespath.JMESPath
}

// CompileExpr compiles a JMESPath expression. It refuses an empty one, a
// syntax error, a function that does not exist, and a function called
// with the wrong number of arguments, so that a bad expression fails at
// construction, never at the first event.
func CompileExpr(src string) (*Expr, error) {
	if strings.TrimSpace(src) == "" {
		return nil, errors.New("dedupe: compile expression: empty")
	}
	ast, err := parsing.NewParser().Parse(src)
	if err != nil {
		return nil, fmt.Errorf("dedupe: compile expression %q: %w", src, err)
	}
	funcs := powertoolsFunctions()
	table := map[string]jmespath.FunctionEntry{}
	for _, f := range jmespathDefaults() {
		table[f.Name] = f
	}
	for _, f := range funcs {
		table[f.Name] = f
	}
	if err := checkCalls(ast, table); err != nil {
		return nil, fmt.Errorf("dedupe: compile expression %q: %w", src, err)
	}
	jp, err := jmespath.Compile(src, funcs...)
	if err != nil {
		return nil, fmt.Errorf("dedupe: compile expression %q: %w", src, err)
	}
	return &Expr{src: src, jp: jp}, nil
}

// MustCompileExpr is CompileExpr for expressions known at init; it panics
// on a bad one.
func MustCompileExpr(src string) *Expr {
	e, err := CompileExpr(src)
	if err != nil {
		panic(err)
	}
	return e
}

// String returns the expression's source.
func (e *Expr) String() string { return e.src }

// Search evaluates the expression against event and returns what it
// selected, as encoding/json decodes JSON into an any (strings,
// float64s, bools, nil, []any, map[string]any). event is the JSON of
// the event as []byte or json.RawMessage, or any value that
// encoding/json encodes (an events.EventBridgeEvent, your own struct):
// the expression sees the event as its JSON.
func (e *Expr) Search(event any) (any, error) {
	tree, err := eventTree(event)
	if err != nil {
		return nil, err
	}
	return e.search(tree)
}

func (e *Expr) search(tree any) (any, error) {
	v, err := e.jp.Search(tree)
	if err != nil {
		return nil, fmt.Errorf("evaluate %q: %w", e.src, err)
	}
	return v, nil
}

// Key evaluates the expression against event (as Search does) and
// returns the key it selects: a non-empty string; a whole number below
// 2^53 in magnitude, in decimal; or a non-empty list of those (a
// multi-select such as [detail.customer, detail.orderId]), encoded so
// that two different lists never give one key. Anything else returns an
// error wrapping ErrNoKey that says what was selected (never its value):
// a missing field is never a key, and the event must be refused.
func (e *Expr) Key(event any) (string, error) {
	tree, err := eventTree(event)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrNoKey, err)
	}
	parts, err := e.keyParts(tree)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	writeParts(&b, parts)
	return b.String(), nil
}

// keyParts evaluates the expression on a decoded event and checks what it
// selected.
func (e *Expr) keyParts(tree any) ([]string, error) {
	v, err := e.search(tree)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoKey, err)
	}
	if list, ok := v.([]any); ok {
		if len(list) == 0 {
			return nil, fmt.Errorf("%w: %q selected an empty list", ErrNoKey, e.src)
		}
		parts := make([]string, len(list))
		for i, x := range list {
			s, ok := keyScalar(x)
			if !ok {
				return nil, fmt.Errorf("%w: %q selected a list holding %s", ErrNoKey, e.src, describe(x))
			}
			parts[i] = s
		}
		return parts, nil
	}
	s, ok := keyScalar(v)
	if !ok {
		return nil, fmt.Errorf("%w: %q selected %s", ErrNoKey, e.src, describe(v))
	}
	return []string{s}, nil
}

// writeParts writes parts as their count, ':' and the parts, escaped
// and each followed by '|': an injective encoding, also of several lists
// written one after the other.
func writeParts(b *strings.Builder, parts []string) {
	b.WriteString(strconv.Itoa(len(parts)))
	b.WriteByte(':')
	for _, p := range parts {
		writeEscaped(b, p)
		b.WriteByte('|')
	}
}

// Payload evaluates the expression against event (as Search does) and
// returns the canonical JSON of what it selected, to be fingerprinted.
// It returns an error wrapping ErrNoFingerprint when that is null (the
// fields are missing: a typo would otherwise fingerprint every event the
// same), or holds a whole number of 2^53 or more, which float64, and so
// JMESPath, cannot tell from its neighbours (select such an ID as a
// string, or leave it out).
func (e *Expr) Payload(event any) ([]byte, error) {
	tree, err := eventTree(event)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoFingerprint, err)
	}
	return e.payload(tree)
}

func (e *Expr) payload(tree any) ([]byte, error) {
	v, err := e.search(tree)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoFingerprint, err)
	}
	if v == nil {
		return nil, fmt.Errorf("%w: %q selected null", ErrNoFingerprint, e.src)
	}
	if inexact(v) {
		return nil, fmt.Errorf("%w: %q selected a whole number of 2^53 or more, which cannot be compared exactly", ErrNoFingerprint, e.src)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("%w: encode: %w", ErrNoFingerprint, err)
	}
	return CanonicalJSON(b)
}

// keyScalar returns the key form of a non-empty string or an exact whole
// number.
func keyScalar(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, x != "" && utf8.ValidString(x)
	case float64:
		if x != math.Trunc(x) || math.Abs(x) >= maxExactInt {
			return "", false
		}
		return strconv.FormatInt(int64(x), 10), true
	}
	return "", false
}

// inexact reports whether v holds a whole number too large for float64
// to hold exactly.
func inexact(v any) bool {
	switch x := v.(type) {
	case float64:
		return x == math.Trunc(x) && math.Abs(x) >= maxExactInt
	case []any:
		for _, y := range x {
			if inexact(y) {
				return true
			}
		}
	case map[string]any:
		for _, y := range x {
			if inexact(y) {
				return true
			}
		}
	}
	return false
}

// describe names the kind of v for an error, never its value.
func describe(v any) string {
	switch x := v.(type) {
	case nil:
		return "null (a missing field?)"
	case string:
		if x == "" {
			return "an empty string"
		}
		return "a string that is not valid UTF-8"
	case bool:
		return "a boolean"
	case float64:
		return "a number that is not a whole number below 2^53"
	case []any:
		if len(x) == 0 {
			return "an empty list"
		}
		return "a list"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("a %T", v)
}

// eventTree returns the JSON tree of an event.
func eventTree(event any) (any, error) {
	var raw []byte
	switch v := event.(type) {
	case []byte:
		raw = v
	case json.RawMessage:
		raw = v
	default:
		b, err := json.Marshal(event)
		if err != nil {
			return nil, fmt.Errorf("encode event: %w", err)
		}
		raw = b
	}
	var tree any
	if err := json.Unmarshal(raw, &tree); err != nil {
		return nil, fmt.Errorf("decode event: %w", err)
	}
	return tree, nil
}

// checkCalls checks every function call in ast against table: the
// function exists and gets a number of arguments it accepts.
func checkCalls(node parsing.ASTNode, table map[string]jmespath.FunctionEntry) error {
	if node.NodeType == parsing.ASTFunctionExpression {
		name, _ := node.Value.(string)
		f, ok := table[name]
		if !ok {
			return fmt.Errorf("unknown function %s()", name)
		}
		least, most := 0, len(f.Arguments)
		for _, a := range f.Arguments {
			if !a.Optional && !a.Variadic {
				least++
			}
			if a.Variadic {
				most = math.MaxInt
			}
		}
		if n := len(node.Children); n < least || n > most {
			return fmt.Errorf("%s() called with %d arguments", name, n)
		}
	}
	for _, c := range node.Children {
		if err := checkCalls(c, table); err != nil {
			return err
		}
	}
	return nil
}

// jmespathDefaults returns JMESPath's built-in functions.
func jmespathDefaults() []jmespath.FunctionEntry {
	return functions.GetDefaultFunctions()
}

// powertoolsFunctions returns Powertools' JMESPath functions.
func powertoolsFunctions() []jmespath.FunctionEntry {
	str := []jmespath.ArgSpec{{Types: []jmespath.JpType{jmespath.JpString}}}
	return []jmespath.FunctionEntry{
		{Name: "powertools_json", Arguments: str, Handler: func(args []any) (any, error) {
			var v any
			if err := json.Unmarshal([]byte(args[0].(string)), &v); err != nil {
				return nil, fmt.Errorf("powertools_json: not JSON: %w", err)
			}
			return v, nil
		}},
		{Name: "powertools_base64", Arguments: str, Handler: func(args []any) (any, error) {
			b, err := base64.StdEncoding.DecodeString(args[0].(string))
			if err != nil {
				return nil, fmt.Errorf("powertools_base64: %w", err)
			}
			return text("powertools_base64", b)
		}},
		{Name: "powertools_base64_gzip", Arguments: str, Handler: func(args []any) (any, error) {
			b, err := base64.StdEncoding.DecodeString(args[0].(string))
			if err != nil {
				return nil, fmt.Errorf("powertools_base64_gzip: %w", err)
			}
			zr, err := gzip.NewReader(bytes.NewReader(b))
			if err != nil {
				return nil, fmt.Errorf("powertools_base64_gzip: %w", err)
			}
			out, err := io.ReadAll(io.LimitReader(zr, maxDecodedBytes+1))
			if err != nil {
				return nil, fmt.Errorf("powertools_base64_gzip: %w", err)
			}
			if len(out) > maxDecodedBytes {
				return nil, fmt.Errorf("powertools_base64_gzip: inflates to more than %d bytes", maxDecodedBytes)
			}
			return text("powertools_base64_gzip", out)
		}},
	}
}

// text returns b as a string when it is valid UTF-8.
func text(fn string, b []byte) (any, error) {
	if !utf8.Valid(b) {
		return nil, fmt.Errorf("%s: decoded data is not UTF-8 text", fn)
	}
	return string(b), nil
}
