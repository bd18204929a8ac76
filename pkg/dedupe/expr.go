package dedupe

import (
	"bytes"
	"compress/gzip"
	"encoding"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	jmespath "github.com/jmespath-community/go-jmespath"
	"github.com/jmespath-community/go-jmespath/pkg/functions"
	"github.com/jmespath-community/go-jmespath/pkg/parsing"
)

// maxDecodedBytes bounds what powertools_base64_gzip inflates, so that a
// small event cannot expand without limit: 6 MiB, Lambda's largest
// synchronous payload.
const maxDecodedBytes = 6 << 20

// maxExactInt is 2^53: every whole number below it in magnitude has one
// exact float64, so two different ones never compare equal.
const maxExactInt = 1 << 53

// jmesExpr is a JMESPath expression (https://jmespath.org), compiled once,
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
// Numbers keep the exact text the event gives them until an operator or
// a function takes them (as float64, the type JMESPath computes with);
// objects are visited in key order (keys, values, items, the *
// projection), so that one event always gives one selection.
//
// An jmesExpr is safe for concurrent use.
type jmesExpr struct {
	src   string
	ast   parsing.ASTNode
	shape shape
}

// compileExpr compiles a JMESPath expression. It refuses, so that a bad
// expression fails at construction, never at the first event: an empty
// one; a syntax error; a function that does not exist; a function called
// with too few or too many arguments (a variadic one, not_null or merge,
// needs at least one); an argument that can never have a type the
// function takes (lower({a: a}), join(',', `1`)); an undefined variable;
// an object that names one key twice ({a: id, a: 'v1'}); and a call that
// reads nothing of the event and fails (abs('x')).
func compileExpr(src string) (*jmesExpr, error) {
	if strings.TrimSpace(src) == "" {
		return nil, errors.New("dedupe: compile expression: empty")
	}
	ast, err := parsing.NewParser().Parse(src)
	if err != nil {
		return nil, fmt.Errorf("dedupe: compile expression %q: %w", src, err)
	}
	sh, err := analyze(ast, exprFunctions(), nil)
	if err != nil {
		return nil, fmt.Errorf("dedupe: compile expression %q: %w", src, err)
	}
	return &jmesExpr{src: src, ast: ast, shape: sh}, nil
}

// mustCompileExpr is compileExpr for expressions known at init; it panics
// on a bad one.
func mustCompileExpr(src string) *jmesExpr {
	e, err := compileExpr(src)
	if err != nil {
		panic(err)
	}
	return e
}

// String returns the expression's source.
func (e *jmesExpr) String() string { return e.src }

// Search evaluates the expression against event and returns what it
// selected, as encoding/json decodes JSON into an any (strings,
// float64s, bools, nil, []any, map[string]any). event is the JSON of
// the event as []byte or json.RawMessage, or any value that
// encoding/json encodes (an events.EventBridgeEvent, your own struct):
// the expression sees the event as its JSON.
func (e *jmesExpr) Search(event any) (any, error) {
	tree, err := eventTree(event)
	if err != nil {
		return nil, err
	}
	v, err := e.search(tree)
	if err != nil {
		return nil, err
	}
	out, _ := floats(v.v)
	return out, nil
}

// search evaluates the expression on a decoded event. Its errors name
// the expression and what went wrong, never a value of the event.
func (e *jmesExpr) search(tree any) (val, error) {
	ev := evaluator{root: tree, funcs: exprFunctions()}
	v, err := ev.eval(e.ast, val{v: tree})
	if err != nil {
		return val{}, fmt.Errorf("evaluate %q: %w", e.src, err)
	}
	return v, nil
}

// Key evaluates the expression against event (as Search does) and
// returns the key it selects: a non-empty string; a whole number (the
// event's own digits, exactly; a number computed by a function must be
// below 2^53); or a non-empty list of those (a multi-select such as
// [detail.customer, detail.orderId]). The encoding is injective: two
// different selections, a number and a string of its digits, a string
// and a list holding it, never give one key.
//
// Anything else returns an error wrapping ErrNoKey that says what was
// selected (never its value), and the event must be refused: a missing
// field is never a key, and neither is a value computed from one
// (to_string(orderId) or type(orderId) of an event without orderId, a
// projection that skipped a null, a literal default such as
// orderId || 'none', an element a filter chose because a field is
// missing), nor a value made of literals alone that the event only
// chose (not_null('v1', id), id && 'v1'), nor one computed from a number
// float64 cannot hold exactly.
func (e *jmesExpr) Key(event any) (string, error) {
	tree, err := eventTree(event)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrNoKey, err)
	}
	sel, err := e.keySel(tree)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	sel.write(&b)
	return b.String(), nil
}

// keySel is a selection in its key form: typed parts ('s' and the
// string, or 'n' and a whole number in decimal), and whether they were a
// list.
type keySel struct {
	parts []string
	list  bool
}

// stringSel returns the list selection of parts, all strings.
func stringSel(parts ...string) keySel {
	typed := make([]string, len(parts))
	for i, p := range parts {
		typed[i] = "s" + p
	}
	return keySel{parts: typed, list: true}
}

// write writes the selection, a scalar as '=' and its part, a list as
// its count and ':', each part escaped and followed by '|':
//
//	"1"   =s1|      1   =n1|      ["1"]   1:s1|      ["a", 2]   2:sa|n2|
//
// The encoding is injective, also of several selections written one
// after the other: a part never holds '|', and the header says how many
// parts follow.
func (k keySel) write(b *strings.Builder) {
	if k.list {
		b.WriteString(strconv.Itoa(len(k.parts)))
		b.WriteByte(':')
	} else {
		b.WriteByte('=')
	}
	for _, p := range k.parts {
		writeEscaped(b, p)
		b.WriteByte('|')
	}
}

// keySel evaluates the expression on a decoded event and checks that it
// selected a key: what selection checks, and not a value made of
// literals alone (or picked out of a list or object that mixes literals
// with fields), which every event that reaches it would share, nor one
// computed from literals and truth values alone, which takes one of a
// few values for every event.
func (e *jmesExpr) keySel(tree any) (keySel, error) {
	sel, v, err := e.selection(tree)
	switch {
	case err != nil:
		return keySel{}, err
	case v.konst:
		return keySel{}, fmt.Errorf("%w: %q %s, which every event would share; select a field of the event", ErrNoKey, e.src, literalOnly)
	case v.few:
		return keySel{}, fmt.Errorf("%w: %q %s; select a field of the event", ErrNoKey, e.src, truthOnly)
	}
	return sel, nil
}

// literalOnly and truthOnly say why a key or fingerprint is refused.
const (
	literalOnly = "selected a value made of literals alone, or picked out of a list or object that mixes literals with fields (a literal part cannot be told apart)"
	truthOnly   = "computed its value from comparisons and literals alone (such as to_string(!id)), which takes one of a few values for every event"
)

// scopeSel evaluates a scope expression on a decoded event: what
// selection checks. A literal is a scope ('orders' names a namespace).
func (e *jmesExpr) scopeSel(tree any) (keySel, error) {
	sel, _, err := e.selection(tree)
	return sel, err
}

// selection evaluates the expression on a decoded event, checks that it
// selected what a key or scope can be, and returns the value it
// selected, whose provenance tells whether it is made of literals alone.
func (e *jmesExpr) selection(tree any) (keySel, val, error) {
	v, err := e.search(tree)
	if err != nil {
		return keySel{}, val{}, fmt.Errorf("%w: %w", ErrNoKey, err)
	}
	var sel keySel
	if list, ok := v.v.([]any); ok {
		if len(list) == 0 {
			return keySel{}, val{}, fmt.Errorf("%w: %q selected an empty list", ErrNoKey, e.src)
		}
		sel = keySel{parts: make([]string, len(list)), list: true}
		for i, x := range list {
			s, ok := keyScalar(x)
			if !ok {
				return keySel{}, val{}, fmt.Errorf("%w: %q selected a list holding %s", ErrNoKey, e.src, describe(x))
			}
			sel.parts[i] = s
		}
	} else {
		s, ok := keyScalar(v.v)
		if !ok {
			return keySel{}, val{}, fmt.Errorf("%w: %q selected %s", ErrNoKey, e.src, describe(v.v))
		}
		sel = keySel{parts: []string{s}}
	}
	switch {
	case v.inexact:
		return keySel{}, val{}, fmt.Errorf("%w: %q computed its key from a number float64 cannot hold exactly (select it without a function or operator)", ErrNoKey, e.src)
	case v.missing:
		return keySel{}, val{}, fmt.Errorf("%w: %q computed its key from a missing value (a null field, a projection that skipped one, or a literal default)", ErrNoKey, e.src)
	}
	return sel, v, nil
}

// Payload evaluates the expression against event (as Search does) and
// returns the canonical JSON of what it selected, to be fingerprinted.
// It returns an error wrapping ErrNoFingerprint when the selection holds
// no information: only nulls and empty lists or objects (null, [null,
// null], {"amount": null}, []: the fields are missing, and every such
// event would have one fingerprint); when a function or operator turned
// a missing value into another (to_string(amount) of an event without
// amount is "null"); when it is made of literals alone (id && 'v1'),
// which every event would share; and when it holds a number that cannot
// be compared exactly (one computed from a number float64 cannot hold, or
// a computed whole number of 2^53 or more). Numbers selected from the event as they
// are keep their exact digits.
func (e *jmesExpr) Payload(event any) ([]byte, error) {
	tree, err := eventTree(event)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoFingerprint, err)
	}
	return e.payload(tree)
}

func (e *jmesExpr) payload(tree any) ([]byte, error) {
	v, err := e.search(tree)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoFingerprint, err)
	}
	switch {
	case v.v == nil:
		return nil, fmt.Errorf("%w: %q selected null", ErrNoFingerprint, e.src)
	case vacuous(v.v):
		return nil, fmt.Errorf("%w: %q selected only nulls and empty lists or objects", ErrNoFingerprint, e.src)
	case v.masked:
		return nil, fmt.Errorf("%w: %q computed its selection from a missing value", ErrNoFingerprint, e.src)
	case v.konst:
		return nil, fmt.Errorf("%w: %q %s, which every event would share", ErrNoFingerprint, e.src, literalOnly)

	case v.inexact || inexact(v.v):
		return nil, fmt.Errorf("%w: %q selected a number that cannot be compared exactly", ErrNoFingerprint, e.src)
	}
	b, err := json.Marshal(v.v)
	if err != nil {
		return nil, fmt.Errorf("%w: %q: encode: %w", ErrNoFingerprint, e.src, safeJSONError(err))
	}
	return CanonicalJSON(b)
}

// vacuous reports whether v holds nothing but nulls and empty lists and
// objects.
func vacuous(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case []any:
		for _, y := range x {
			if !vacuous(y) {
				return false
			}
		}
		return true
	case map[string]any:
		for _, y := range x {
			if !vacuous(y) {
				return false
			}
		}
		return true
	}
	return false
}

// keyScalar returns the typed key form of a non-empty string or an exact
// whole number.
func keyScalar(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return "s" + x, x != "" && utf8.ValidString(x)
	case json.Number:
		d, ok := wholeDecimal(string(x))
		return "n" + d, ok
	case float64:
		if x != math.Trunc(x) || math.Abs(x) >= maxExactInt {
			return "", false
		}
		return "n" + strconv.FormatInt(int64(x), 10), true
	}
	return "", false
}

// inexact reports whether v holds a computed whole number too large for
// float64 to hold exactly.
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
	case json.Number:
		return "a number that is not a whole number"
	case []any:
		if len(x) == 0 {
			return "an empty list"
		}
		return "a list"
	case map[string]any:
		return "an object"
	}
	return jsonKind(v)
}

// eventTree returns the JSON tree of an event, numbers as json.Number.
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
			return nil, fmt.Errorf("encode event: %w", safeJSONError(err))
		}
		if !marshaledValid(event, b) {
			return nil, errNotUTF8
		}
		raw = b
	}
	tree, err := decodeJSON(raw)
	if err != nil {
		return nil, fmt.Errorf("decode event: %w", err)
	}
	return tree, nil
}

// decodeJSON decodes exactly one JSON value, numbers as json.Number. It
// refuses text that is not UTF-8, as JSON is (RFC 8259), and a \u escape
// of a UTF-16 surrogate that is not half of a pair: encoding/json would
// make every invalid byte, and every lone surrogate, U+FFFD, so that two
// different strings would select one key. Its error never quotes the
// input.
func decodeJSON(b []byte) (any, error) {
	if !utf8.Valid(b) {
		return nil, errors.New("not valid JSON: not UTF-8")
	}
	if loneSurrogate(b) {
		return nil, errors.New("not valid JSON: a lone UTF-16 surrogate escape")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, safeJSONError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("not valid JSON: data after the value")
	}
	return v, nil
}

// exprFunctions returns the functions of every expression: JMESPath's
// (keys, values and items in key order) and Powertools' three.
var exprFunctions = sync.OnceValue(func() map[string]jmespath.FunctionEntry {
	table := map[string]jmespath.FunctionEntry{}
	for _, f := range jmespathDefaults() {
		table[f.Name] = f
	}
	for _, f := range powertoolsFunctions() {
		table[f.Name] = f
	}
	ordered := func(name string, pick func(m map[string]any, k string) any) {
		f := table[name]
		f.Handler = func(args []any) (any, error) {
			m := args[0].(map[string]any)
			out := make([]any, 0, len(m))
			for _, k := range sortedKeys(m) {
				out = append(out, pick(m, k))
			}
			return out, nil
		}
		table[name] = f
	}
	ordered("keys", func(_ map[string]any, k string) any { return k })
	ordered("values", func(m map[string]any, k string) any { return m[k] })
	ordered("items", func(m map[string]any, k string) any { return []any{k, m[k]} })
	return table
})

// jmespathDefaults returns JMESPath's built-in functions.
func jmespathDefaults() []jmespath.FunctionEntry {
	return functions.GetDefaultFunctions()
}

// powertoolsFunctions returns Powertools' JMESPath functions.
func powertoolsFunctions() []jmespath.FunctionEntry {
	str := []jmespath.ArgSpec{{Types: []jmespath.JpType{jmespath.JpString}}}
	return []jmespath.FunctionEntry{
		{Name: "powertools_json", Arguments: str, Handler: func(args []any) (any, error) {
			v, err := decodeJSON([]byte(args[0].(string)))
			if err != nil {
				return nil, evalErrorf("powertools_json(): the string is %w", err)
			}
			return v, nil
		}},
		{Name: "powertools_base64", Arguments: str, Handler: func(args []any) (any, error) {
			b, err := base64.StdEncoding.DecodeString(args[0].(string))
			if err != nil {
				return nil, evalErrorf("powertools_base64(): the string is not base64 (%v)", err)
			}
			return text("powertools_base64", b)
		}},
		{Name: "powertools_base64_gzip", Arguments: str, Handler: func(args []any) (any, error) {
			b, err := base64.StdEncoding.DecodeString(args[0].(string))
			if err != nil {
				return nil, evalErrorf("powertools_base64_gzip(): the string is not base64 (%v)", err)
			}
			zr, err := gzip.NewReader(bytes.NewReader(b))
			if err != nil {
				return nil, evalErrorf("powertools_base64_gzip(): the data is not gzip (%v)", err)
			}
			out, err := io.ReadAll(io.LimitReader(zr, maxDecodedBytes+1))
			if err != nil {
				return nil, evalErrorf("powertools_base64_gzip(): the gzip data is broken (%v)", err)
			}
			if len(out) > maxDecodedBytes {
				return nil, evalErrorf("powertools_base64_gzip(): inflates to more than %d bytes", maxDecodedBytes)
			}
			return text("powertools_base64_gzip", out)
		}},
	}
}

// text returns b as a string when it is valid UTF-8.
func text(fn string, b []byte) (any, error) {
	if !utf8.Valid(b) {
		return nil, evalErrorf("%s(): the decoded data is not UTF-8 text", fn)
	}
	return string(b), nil
}

// loneSurrogate reports whether the JSON text b holds a \u escape of a
// UTF-16 surrogate that is not half of a pair: a low surrogate first, or
// a high one not followed by a low one's escape.
func loneSurrogate(b []byte) bool {
	for i := 0; i+1 < len(b); i++ {
		if b[i] != '\\' {
			continue
		}
		if b[i+1] != 'u' {
			i++ // an escaped character, perhaps a backslash
			continue
		}
		u, ok := codeUnit(b[i+2:])
		if !ok {
			return false // not valid JSON: the decoder says so
		}
		i += 5
		switch {
		case u >= 0xDC00 && u <= 0xDFFF:
			return true
		case u >= 0xD800 && u <= 0xDBFF:
			if i+2 >= len(b) || b[i+1] != '\\' || b[i+2] != 'u' {
				return true
			}
			if l, ok := codeUnit(b[i+3:]); !ok || l < 0xDC00 || l > 0xDFFF {
				return true
			}
			i += 6
		}
	}
	return false
}

// errNotUTF8 refuses an event given as a Go value with a string that is
// not UTF-8.
var errNotUTF8 = errors.New("encode event: a string that is not UTF-8")

// marshaledValid reports whether b, json.Marshal's encoding of v, came
// from strings that are all UTF-8. Marshal writes each invalid byte as
// the escape \ufffd, so only an encoding that holds one (which a
// json.RawMessage may hold too, as written) has v walked.
func marshaledValid(v any, b []byte) bool {
	return !bytes.Contains(b, []byte(`\ufffd`)) || jsonStringsValid(reflect.ValueOf(v))
}

// jsonStringsValid reports whether every string json.Marshal encodes of
// v, its maps' string keys included, is UTF-8: json.Marshal writes each
// invalid byte as U+FFFD, as decoding does, so that two different strings
// would encode alike. A value that encodes itself (json.Marshaler,
// encoding.TextMarshaler, json.RawMessage) is left to its output, which
// decodeJSON checks. It is called after json.Marshal accepted v, which
// refuses a cycle.
func jsonStringsValid(v reflect.Value) bool {
	if !v.IsValid() {
		return true
	}
	t := v.Type()
	if t.Implements(marshalerType) || t.Implements(textMarshalerType) ||
		v.CanAddr() && (reflect.PointerTo(t).Implements(marshalerType) || reflect.PointerTo(t).Implements(textMarshalerType)) {
		return true
	}
	switch v.Kind() {
	case reflect.String:
		return utf8.ValidString(v.String())
	case reflect.Pointer, reflect.Interface:
		return v.IsNil() || jsonStringsValid(v.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if f := t.Field(i); (f.IsExported() || f.Anonymous) && f.Tag.Get("json") != "-" && !jsonStringsValid(v.Field(i)) {
				return false
			}
		}
	case reflect.Map:
		for it := v.MapRange(); it.Next(); {
			if k := it.Key(); k.Kind() == reflect.String && !utf8.ValidString(k.String()) || !jsonStringsValid(it.Value()) {
				return false
			}
		}
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return true // bytes, encoded as base64
		}
		for i := range v.Len() {
			if !jsonStringsValid(v.Index(i)) {
				return false
			}
		}
	}
	return true
}

var (
	marshalerType     = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
)

// codeUnit returns the UTF-16 code unit that the four hexadecimal digits
// at the start of b spell.
func codeUnit(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	u, err := strconv.ParseUint(string(b[:4]), 16, 16)
	return rune(u), err == nil
}
