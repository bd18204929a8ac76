package dedupe

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"

	jmespath "github.com/jmespath-community/go-jmespath"
	"github.com/jmespath-community/go-jmespath/pkg/parsing"
	"github.com/jmespath-community/go-jmespath/pkg/util"
)

// The evaluator below runs JMESPath over an event decoded with
// json.Decoder.UseNumber, and tracks, beside every value, what it derives
// from. It exists because the library's own interpreter cannot say
// whether a key came from a missing field (to_string(orderId) of an event
// without one is "null", as for every other such event), rounds every
// number through float64, visits objects in Go's random map order, and
// prints the values of the arguments it refuses.
//
// Its results are the library's on the same data, with three exceptions:
// numbers selected from the event keep their exact text (json.Number)
// until an operator or function needs a float64; objects are visited in
// key order (values, keys, items, the * projection), so that one event
// always gives one key; and an error in the left side of a projection or
// filter is an error, not null.

// val is a value in an evaluation and what it derives from.
type val struct {
	v any
	// missing: v is null or was computed from a null (a missing field),
	// a projection dropped a null, or a fallback chose a literal because
	// a value was missing or empty. Keys refuse it.
	missing bool
	// masked: an operator or function turned a missing value into a
	// non-null one (to_string(null) is "null", type(null) "null", a
	// literal fallback). Fingerprints refuse it.
	masked bool
	// inexact: a number float64 cannot hold exactly (its shortest
	// float64 form has another value) went into an operator, function or
	// filter. Keys and fingerprints refuse it.
	inexact bool
	// konst: computed from literals alone, not from the event.
	konst bool
	// few: computed from literals and truth values alone (a comparison,
	// a negation, contains(), a literal): over all events it takes one
	// of a few values, such as "true" and "false". konst implies few.
	few bool
	// mixed: a list or object some of whose parts are computed from
	// literals alone, some from literals and truth values alone, and
	// some from the event (two of the three), or a value computed from
	// one. What is picked out of it (a field, an index, a slice, a
	// projection's or a filter's elements, max or min, keys or values)
	// may be a literal part, which is not told apart: it counts as konst.
	mixed bool
	// inner: a list or object one of whose parts is itself mixed (a
	// mix, or a string holding literal text beside the event's, such as
	// join('-', ['v1', id])). A part picked out of it counts as mixed.
	inner bool
	// shaped: a list or object the expression built ([a, b], {k: a},
	// to_array(a)), or a value computed from one: how many parts it has,
	// and an object's keys, are the expression's, not the event's, so
	// its length and keys are literals.
	shaped bool
}

// or returns v with the provenance of w added (konst only if both are).
func (v val) or(w val) val {
	v.missing = v.missing || w.missing
	v.masked = v.masked || w.masked
	v.inexact = v.inexact || w.inexact
	v.konst = v.konst && w.konst
	v.few = v.few && w.few
	v.mixed = v.mixed || w.mixed
	v.shaped = v.shaped || w.shaped
	v.inner = v.inner || w.inner
	return v
}

// part returns v, a list or object, with the provenance of its part w
// added: as or does, except that w being mixed makes v inner, not mixed
// (a list of strings each holding literal text is no mix of literals
// with fields).
//
// A part that is a literal default the event did not fill
// ([key, versionId || 'null']) is a literal part: it makes v missing
// no more than ['v1', key] is (a list of defaults alone is made of
// literals, and refused as such).
func (v val) part(w val) val {
	w.inner = w.inner || w.mixed
	w.mixed = false
	if w.konst && w.missing && w.v != nil {
		w.missing, w.masked = false, false
	}
	return v.or(w)
}

// picked returns v as a part picked out of it: konst when v is mixed,
// and mixed when v is inner.
func (v val) picked() val {
	v.konst = v.konst || v.mixed
	v.few = v.few || v.mixed
	v.mixed = v.mixed || v.inner
	return v
}

// parts tells, as the parts of a list, an object or a function's
// arguments are seen, whether they are of more than one kind: made of
// literals alone, of literals and truth values alone, or read from the
// event.
type parts struct{ literal, truth, event bool }

func (p *parts) add(x val) {
	switch {
	case x.konst:
		p.literal = true
	case x.few:
		p.truth = true
	default:
		p.event = true
	}
}

func (p parts) mixed() bool {
	return p.literal && p.truth || p.literal && p.event || p.truth && p.event
}

// derived returns a value computed by an operator or function from
// inputs whose provenance is from: a truth value is one of few.
func derived(x any, from val) val {
	_, truth := x.(bool)
	return val{v: x, missing: from.missing || x == nil, masked: from.masked || (from.missing && x != nil), inexact: from.inexact,
		konst: from.konst, few: from.few || truth, mixed: from.mixed, inner: from.inner, shaped: from.shaped}
}

// evaluator evaluates one expression against one event.
type evaluator struct {
	root  any
	vars  map[string]val
	funcs map[string]jmespath.FunctionEntry
	// built counts the bytes of the strings functions built so far, and
	// allowed bounds them once it is known (see spend); decoded counts
	// what powertools_base64 and powertools_base64_gzip decoded, which
	// maxDecodedBytes bounds.
	built, allowed, decoded int
}

// Bounds of what functions may build in one evaluation: builtBase bytes,
// and past that builtPerByte times the size of the event. A key or
// fingerprint selects; what functions compute from it stays near its
// size, while a hostile event could make join inside map copy a long
// field once per element, or pad_left pad to a width it chose, until the
// function ran out of memory.
const (
	builtBase    = 64 << 10
	builtPerByte = 16
)

// spend accounts for n bytes a function builds (or, with keep false,
// checks that it could, before it runs), and refuses them past the
// bounds above. The event's size is measured only when builtBase is
// passed.
func (e *evaluator) spend(n float64, keep bool) error {
	total := float64(e.built) + n
	if total > builtBase {
		if e.allowed == 0 {
			e.allowed = builtBase + builtPerByte*treeSize(e.root)
		}
		if total > float64(e.allowed) {
			return evalErrorf("the expression builds more text than its event holds (functions may build %d bytes for it): select rather than compute", e.allowed)
		}
	}
	if keep {
		e.built = int(total)
	}
	return nil
}

// treeSize approximates the size of a decoded event: its strings' and
// keys' bytes, and a few bytes for every other value.
func treeSize(v any) int {
	switch x := v.(type) {
	case string:
		return len(x) + 2
	case json.Number:
		return len(x)
	case []any:
		n := 2
		for _, y := range x {
			n += treeSize(y) + 1
		}
		return n
	case map[string]any:
		n := 2
		for k, y := range x {
			n += len(k) + 3 + treeSize(y) + 1
		}
		return n
	}
	return 4
}

// builds estimates the bytes function name will build from args, for
// those that can build much more than they are given (pad, join,
// replace), or returns 0.
func builds(name string, args []any) float64 {
	switch name {
	case "pad_left", "pad_right":
		s, _ := args[0].(string)
		w, _ := args[1].(float64)
		pad := 1
		if len(args) > 2 {
			if p, ok := args[2].(string); ok && len(p) > 0 {
				pad = len(p)
			}
		}
		return max(float64(len(s)), w*float64(pad))
	case "join":
		sep, _ := args[0].(string)
		list, _ := args[1].([]any)
		n := float64(len(sep) * max(len(list)-1, 0))
		for _, x := range list {
			if s, ok := x.(string); ok {
				n += float64(len(s))
			}
		}
		return n
	case "replace":
		s, _ := args[0].(string)
		old, _ := args[1].(string)
		repl, _ := args[2].(string)
		count := float64(strings.Count(s, old)) // runes+1 for an empty old
		if len(args) > 3 {
			if c, ok := args[3].(float64); ok && c >= 0 {
				count = min(count, c)
			}
		}
		return float64(len(s)) + count*float64(max(len(repl)-len(old), 0))
	}
	return 0
}

// evalError is an error of evaluation. Its message names functions,
// argument positions and kinds, never a value.
type evalError struct{ err error }

func (e *evalError) Error() string { return e.err.Error() }
func (e *evalError) Unwrap() error { return e.err }

func evalErrorf(format string, args ...any) error {
	return &evalError{fmt.Errorf(format, args...)}
}

func (e *evaluator) eval(n parsing.ASTNode, in val) (val, error) {
	switch n.NodeType {
	case parsing.ASTLiteral:
		return val{v: n.Value, konst: true, few: true}, nil
	case parsing.ASTIdentity, parsing.ASTCurrentNode:
		return in, nil
	case parsing.ASTRootNode:
		return val{v: e.root}, nil
	case parsing.ASTField:
		m, _ := in.v.(map[string]any)
		x := m[n.Value.(string)]
		if x == nil && n.Value == "null" {
			// A bare null, as users write ([?sku != null]), is in
			// JMESPath a field that no event has: it is read as the
			// literal null it is meant to be, not as a missing value.
			return val{konst: true, few: true}, nil
		}
		in = in.picked()
		in.v, in.missing = x, in.missing || x == nil
		return in, nil
	case parsing.ASTIndex:
		list, _ := in.v.([]any)
		i := n.Value.(int)
		if i < 0 {
			i += len(list)
		}
		var x any
		if i >= 0 && i < len(list) {
			x = list[i]
		}
		in = in.picked()
		in.v, in.missing = x, in.missing || x == nil
		return in, nil
	case parsing.ASTSlice:
		params := util.MakeSliceParams(n.Value.([]*int))
		var x any
		switch s := in.v.(type) {
		case []any:
			r, err := util.Slice(s, params)
			if err != nil {
				return val{}, evalErrorf("slice: %v", err)
			}
			x = r
		case string:
			if r, err := util.Slice([]rune(s), params); err == nil {
				x = string(r)
			}
		}
		in = in.picked()
		in.v, in.missing = x, in.missing || x == nil
		return in, nil
	case parsing.ASTSubexpression, parsing.ASTIndexExpression:
		left, err := e.eval(n.Children[0], in)
		if err != nil || left.v == nil {
			left.missing = true
			return left, err
		}
		return e.eval(n.Children[1], left)
	case parsing.ASTPipe:
		cur := in
		for _, c := range n.Children {
			var err error
			if cur, err = e.eval(c, cur); err != nil {
				return val{}, err
			}
		}
		return cur, nil
	case parsing.ASTProjection, parsing.ASTValueProjection, parsing.ASTFilterProjection:
		return e.project(n, in)
	case parsing.ASTFlatten:
		left, err := e.eval(n.Children[0], in)
		if err != nil {
			return val{}, err
		}
		list, ok := left.v.([]any)
		if !ok {
			left.v, left.missing = nil, true
			return left, nil
		}
		flat := []any{}
		for _, x := range list {
			if sub, ok := x.([]any); ok {
				flat = append(flat, sub...)
			} else {
				flat = append(flat, x)
			}
		}
		left.v = flat
		left.missing = left.missing || slices.Contains(flat, nil)
		// The parts of its lists are now its own.
		left.mixed = left.mixed || left.inner
		return left, nil
	case parsing.ASTMultiSelectList:
		out := val{v: []any{}, konst: true, few: true}
		list := make([]any, 0, len(n.Children))
		var ps parts
		for _, c := range n.Children {
			x, err := e.eval(c, in)
			if err != nil {
				return val{}, err
			}
			list = append(list, x.v)
			out = out.part(x)
			ps.add(x)
		}
		out.v, out.mixed, out.shaped = list, out.mixed || ps.mixed(), true
		return out, nil
	case parsing.ASTMultiSelectHash:
		out := val{konst: true, few: true}
		m := make(map[string]any, len(n.Children))
		var ps parts
		for _, c := range n.Children {
			x, err := e.eval(c, in)
			if err != nil {
				return val{}, err
			}
			m[c.Value.(string)] = x.v
			out = out.part(x)
			ps.add(x)
		}
		out.v, out.mixed, out.shaped = m, out.mixed || ps.mixed(), true
		return out, nil
	case parsing.ASTKeyValPair:
		return e.eval(n.Children[0], in)
	case parsing.ASTOrExpression:
		left, err := e.eval(n.Children[0], in)
		if err != nil || !util.IsFalse(left.v) {
			return left, err
		}
		right, err := e.eval(n.Children[1], in)
		if err != nil {
			return val{}, err
		}
		right.inexact = right.inexact || left.inexact
		if right.konst {
			// A literal default taken because the left side is missing or
			// empty: every such event would get the same value.
			right.missing, right.masked = true, true
		}
		return right, nil
	case parsing.ASTAndExpression:
		left, err := e.eval(n.Children[0], in)
		if err != nil || util.IsFalse(left.v) {
			return left, err
		}
		right, err := e.eval(n.Children[1], in)
		if err != nil {
			return val{}, err
		}
		right = right.or(val{missing: left.missing, masked: left.missing, inexact: left.inexact, konst: true, few: true})
		return right, nil
	case parsing.ASTNotExpression:
		x, err := e.eval(n.Children[0], in)
		if err != nil {
			return val{}, err
		}
		return derived(util.IsFalse(x.v), x), nil
	case parsing.ASTComparator:
		return e.compare(n, in)
	case parsing.ASTArithmeticExpression, parsing.ASTArithmeticUnaryExpression:
		return e.arithmetic(n, in)
	case parsing.ASTFunctionExpression:
		return e.call(n, in)
	case parsing.ASTExpRef:
		return val{}, evalErrorf("an expression reference (&) outside a function argument")
	case parsing.ASTLetExpression:
		saved := e.vars
		defer func() { e.vars = saved }()
		vars := make(map[string]val, len(saved)+len(n.Children[0].Children))
		for k, v := range saved {
			vars[k] = v
		}
		for _, b := range n.Children[0].Children {
			x, err := e.eval(b.Children[1], in)
			if err != nil {
				return val{}, err
			}
			vars[b.Children[0].Value.(string)] = x
		}
		e.vars = vars
		return e.eval(n.Children[1], in)
	case parsing.ASTVariable:
		x, ok := e.vars[n.Value.(string)]
		if !ok {
			return val{}, evalErrorf("variable %s is not defined", n.Value)
		}
		return x, nil
	}
	return val{}, evalErrorf("unsupported expression node %s", n.NodeType)
}

// project evaluates a list projection (a[*].b, a[].b, a[1:].b), a filter
// projection (a[?c].b) or an object projection (a.*.b). A null that the
// projection drops makes the result missing, as a null element would.
func (e *evaluator) project(n parsing.ASTNode, in val) (val, error) {
	left, err := e.eval(n.Children[0], in)
	if err != nil {
		return val{}, err
	}
	var elems []any
	switch x := left.v.(type) {
	case []any:
		if n.NodeType != parsing.ASTValueProjection {
			elems = x
		}
	case map[string]any:
		if n.NodeType == parsing.ASTValueProjection {
			for _, k := range sortedKeys(x) {
				elems = append(elems, x[k])
			}
			if elems == nil {
				elems = []any{}
			}
		}
	case string:
		// a string slice (s[::-1]) is a projection over the string.
		if c := n.Children[0]; n.NodeType == parsing.ASTProjection && c.NodeType == parsing.ASTIndexExpression &&
			len(c.Children) > 1 && c.Children[1].NodeType == parsing.ASTSlice {
			return left, nil
		}
	}
	if elems == nil {
		left.v, left.missing = nil, true
		return left, nil
	}
	out := left
	out.v = nil
	collected := []any{}
	// The projection is made of literals alone when each element it
	// keeps is, whatever it read to choose them (a literal visited
	// once per element is the same for every event of that length);
	// it is mixed when its elements are of more than one kind.
	allKonst, allFew := true, true
	var ps parts
	// conds counts the filter's conditions evaluated, literal those
	// made of literals alone.
	conds, literal := 0, 0
	// An identity projection (a[*], a[]) keeps its elements as they
	// are: they are the list's own, not picked out of it.
	keep := n.NodeType != parsing.ASTFilterProjection &&
		(n.Children[1].NodeType == parsing.ASTIdentity || n.Children[1].NodeType == parsing.ASTCurrentNode)
	for _, x := range elems {
		elem := left.picked()
		if keep {
			elem = left
		}
		elem.v = x
		if n.NodeType == parsing.ASTFilterProjection {
			cond, err := e.eval(n.Children[2], elem)
			if err != nil {
				return val{}, err
			}
			// A filter only chooses elements: a missing field in its
			// condition excludes the element, as any other false would.
			// But an element chosen because a value is missing
			// ([?orderId == null]) is chosen for every event without it.
			// An inexact number may have chosen wrongly.
			out.inexact = out.inexact || cond.inexact
			conds++
			if cond.konst {
				literal++
			}
			if util.IsFalse(cond.v) {
				continue
			}
			if cond.missing {
				out.missing, out.masked = true, true
			}
		}
		r, err := e.eval(n.Children[1], elem)
		if err != nil {
			return val{}, err
		}
		if r.v == nil {
			out.missing = true
			continue
		}
		collected = append(collected, r.v)
		out = out.part(r)
		allKonst, allFew = allKonst && r.konst, allFew && r.few
		ps.add(r)
	}
	out.v = collected
	if len(collected) > 0 {
		out.konst, out.few = allKonst, allFew
	} else if conds > 0 && literal == conds {
		// A literal condition that kept nothing keeps nothing of any
		// event.
		out.konst, out.few = true, true
	}
	out.mixed = out.mixed || ps.mixed()
	return out, nil
}

// compare evaluates ==, !=, <, <=, >, >=.
func (e *evaluator) compare(n parsing.ASTNode, in val) (val, error) {
	left, err := e.eval(n.Children[0], in)
	if err != nil {
		return val{}, err
	}
	right, err := e.eval(n.Children[1], in)
	if err != nil {
		return val{}, err
	}
	from := left.or(right)
	l, lossyL := floats(left.v)
	r, lossyR := floats(right.v)
	from.inexact = from.inexact || lossyL || lossyR
	switch n.Value {
	case parsing.TOKEQ:
		return derived(util.ObjsEqual(l, r), from), nil
	case parsing.TOKNE:
		return derived(!util.ObjsEqual(l, r), from), nil
	}
	a, ok1 := l.(float64)
	b, ok2 := r.(float64)
	if !ok1 || !ok2 {
		return derived(nil, from), nil
	}
	var res bool
	switch n.Value {
	case parsing.TOKGT:
		res = a > b
	case parsing.TOKGTE:
		res = a >= b
	case parsing.TOKLT:
		res = a < b
	case parsing.TOKLTE:
		res = a <= b
	}
	return derived(res, from), nil
}

// arithmetic evaluates + - * / % // and unary + -.
func (e *evaluator) arithmetic(n parsing.ASTNode, in val) (val, error) {
	var from val
	nums := make([]float64, 0, 2)
	// zero marks the operands that are a literal zero.
	var zero [2]bool
	ok := true
	for i, c := range n.Children {
		x, err := e.eval(c, in)
		if err != nil {
			return val{}, err
		}
		if i == 0 {
			from = x
		} else {
			from = from.or(x)
		}
		f, lossy := floats(x.v)
		from.inexact = from.inexact || lossy
		num, isNum := f.(float64)
		ok = ok && isNum
		nums = append(nums, num)
		zero[i] = isNum && x.konst && num == 0
	}
	if !ok {
		return derived(nil, from), nil
	}
	if n.NodeType == parsing.ASTArithmeticUnaryExpression {
		if n.Value == parsing.TOKMinus {
			return derived(-nums[0], from), nil
		}
		return derived(nums[0], from), nil
	}
	a, b := nums[0], nums[1]
	var res float64
	switch n.Value {
	case parsing.TOKPlus:
		res = a + b
	case parsing.TOKMinus:
		res = a - b
	case parsing.TOKStar, parsing.TOKMultiply:
		res = a * b
	case parsing.TOKDivide:
		res = a / b
	case parsing.TOKModulo:
		res = math.Mod(a, b)
	case parsing.TOKDiv:
		res = math.Floor(a / b)
	default:
		return val{}, evalErrorf("unsupported arithmetic operator")
	}
	if !exactArithmetic(n.Value, a, b, res) {
		// float64 rounded: other operands round to the same result.
		from.inexact = true
	}
	switch n.Value {
	case parsing.TOKStar, parsing.TOKMultiply:
		if zero[0] || zero[1] {
			// Zero times anything is zero, for every event.
			from.konst, from.few = true, true
		}
	case parsing.TOKDivide, parsing.TOKModulo, parsing.TOKDiv:
		if zero[0] {
			from.konst, from.few = true, true
		}
	}
	return derived(res, from), nil
}

// call evaluates a function call. Its arguments are checked against the
// function's signature here, so that a refusal names the function, the
// argument and its kind, never its value.
func (e *evaluator) call(n parsing.ASTNode, in val) (val, error) {
	name := n.Value.(string)
	f, ok := e.funcs[name]
	if !ok {
		return val{}, evalErrorf("unknown function %s()", name)
	}
	from := val{konst: true, few: true}
	args := make([]any, len(n.Children))
	vals := make([]val, len(n.Children))
	// elem is the provenance of the elements an expression reference
	// visits, which come from the other arguments: set once they are
	// evaluated, before the function calls the reference.
	var elem val
	// body is what the expression reference computed, over all the
	// elements it visited; bodies tells the kinds of those values.
	body := val{konst: true, few: true}
	var ps, bodies parts
	for i, c := range n.Children {
		if c.NodeType == parsing.ASTExpRef {
			ref := c.Children[0]
			args[i] = func(data any) (any, error) {
				r, err := e.eval(ref, val{v: data, konst: elem.konst, few: elem.few, mixed: elem.mixed, shaped: elem.shaped})
				if err != nil {
					return nil, err
				}
				body = body.part(r)
				f, lossy := floats(r.v)
				body.inexact = body.inexact || lossy
				bodies.add(r)
				return f, nil
			}
			vals[i] = val{v: args[i], konst: true}
			continue
		}
		x, err := e.eval(c, in)
		if err != nil {
			return val{}, err
		}
		vals[i] = x
		from = from.or(x)
		ps.add(x)
		if c, ok := carried(name, x.v); ok {
			args[i] = c
			continue
		}
		var lossy bool
		args[i], lossy = floats(x.v)
		from.inexact = from.inexact || lossy
	}
	elem = from.picked()
	if name == "not_null" {
		// not_null returns one of its arguments as it is: its provenance
		// is that argument's, except that a literal taken because the
		// arguments before it were null is missing.
		for i, x := range vals {
			if x.v != nil {
				if x.konst && i > 0 {
					x.missing, x.masked = true, true
				}
				return x, nil
			}
		}
		return derived(nil, from), nil
	}
	if err := checkArgs(name, f.Arguments, args); err != nil {
		return val{}, err
	}
	if (name == "find_first" || name == "find_last") && emptyRange(args) {
		// JMESPath's function would slice the subject out of range.
		return derived(nil, provenance(name, nil, from, vals, ps, body, bodies)), nil
	}
	if n := builds(name, args); n > 0 {
		if err := e.spend(n, false); err != nil {
			return val{}, err
		}
	}
	res, err := handle(name, f.Handler, args)
	if r, ok := res.(string); ok && err == nil {
		if strings.HasPrefix(name, "powertools_base64") {
			// A decoder: bounded by what it may decode, in all.
			if e.decoded += len(r); e.decoded > maxDecodedBytes {
				err = evalErrorf("%s() decodes more than %d bytes in all", name, maxDecodedBytes)
			}
		} else {
			err = e.spend(float64(len(r)), true)
		}
	}
	if err != nil {
		if ee := (*evalError)(nil); errors.As(err, &ee) {
			return val{}, err
		}
		// JMESPath's own functions fail with fixed messages, which
		// quote no argument.
		return val{}, evalErrorf("%s(): %w", name, err)
	}
	out := provenance(name, res, from, vals, ps, body, bodies)
	if name == "sum" || name == "avg" {
		if f, ok := res.(float64); ok && !exactSum(name, args[0], f) {
			out.inexact = true
		}
	}
	if name == "to_number" {
		// A string's number is exact only when float64 holds its value.
		if s, ok := vals[0].v.(string); ok {
			if f, ok := res.(float64); ok && !sameDecimal(strings.TrimPrefix(strings.TrimSpace(s), "+"), strconv.FormatFloat(f, 'g', -1, 64)) {
				out.inexact = true
			}
		}
	}
	return derived(res, out), nil
}

// handle calls a function's handler, and turns a panic of it (a case its
// arguments reach that JMESPath does not check) into an error naming the
// function, never an argument.
func handle(name string, h jmespath.JpFunction, args []any) (res any, err error) {
	defer func() {
		if r := recover(); r != nil {
			res, err = nil, evalErrorf("%s() failed on its arguments", name)
		}
	}()
	return h(args)
}

// emptyRange reports whether find_first's or find_last's start and end
// (args[2] and args[3], when given) leave nothing of the subject to
// search: a start beyond its length, or an end before the start. It
// finds nothing there.
func emptyRange(args []any) bool {
	s, _ := args[0].(string)
	start, end := 0.0, float64(len(s))
	if len(args) > 2 {
		f, ok := args[2].(float64)
		if !ok || f != math.Trunc(f) {
			return false // not a whole number: the function says so
		}
		start = max(0, f)
	}
	if len(args) > 3 {
		f, ok := args[3].(float64)
		if !ok || f != math.Trunc(f) {
			return false
		}
		end = f // the function clamps it to the subject; only end < start matters here
	}
	return start > float64(len(s)) || end < start
}

// carried returns, for function name, a list or object argument x as it
// is when name only moves, counts, groups or orders its elements and
// never reads their values itself: a number float64 cannot hold,
// somewhere inside, is then neither converted nor makes the result
// inexact. sort_by gets a shallow copy of its list, which it sorts in
// place; no other handler writes into its arguments. An expression
// reference's values are converted as they are computed.
func carried(name string, x any) (any, bool) {
	switch name {
	case "sort_by", "max_by", "min_by", "group_by", "map", "reverse", "length", "keys", "values",
		"merge", "to_array", "items", "from_items", "zip":
	default:
		return nil, false
	}
	switch c := x.(type) {
	case []any:
		if name == "sort_by" {
			return slices.Clone(c), true
		}
		return c, true
	case map[string]any:
		return c, true
	}
	return nil, false
}

// provenance returns what res, the result of function name, derives
// from, given the provenance of its arguments taken together (from) and
// one by one (vals, and ps their kinds), and of what its expression
// reference computed (body, and bodies its kinds).
func provenance(name string, res any, from val, vals []val, ps parts, body val, bodies parts) val {
	switch name {
	case "merge":
		from = merged(from, vals)
	case "zip":
		// Its result holds the arguments' parts side by side.
		from.mixed = from.mixed || ps.mixed()
	case "from_items":
		// Its pairs' keys and values, side by side in the list, become
		// an object's keys and values.
		from.mixed = from.mixed || from.inner
	case "to_string":
		switch vals[0].v.(type) {
		case []any, map[string]any:
			// JSON's syntax is literal text beside the values.
			from.mixed = true
		}
	case "map":
		// Its result is what the reference computed from each element.
		out := body
		out.missing = out.missing || from.missing
		out.inexact = out.inexact || from.inexact
		out.mixed = out.mixed || bodies.mixed()
		out.shaped = out.shaped || from.shaped
		from = out
	case "sort_by", "max_by", "min_by", "group_by":
		// They return the list's own elements: what the reference
		// computed only orders, chooses or groups them, and may have
		// done so wrongly if it was missing or inexact (derived marks
		// the result masked when it is missing).
		from.missing = from.missing || body.missing
		from.inexact = from.inexact || body.inexact
		if name == "group_by" && (bodies.literal || bodies.truth) {
			// Its keys are the reference's values.
			from.shaped = true
		}
	case "length", "keys":
		switch vals[0].v.(type) {
		case []any, map[string]any:
			if vals[0].shaped {
				from.konst, from.few = true, true
			}
		}
	case "items":
		// Its pairs hold an object's keys beside its values.
		from.mixed = from.mixed || vals[0].shaped
	case "to_array":
		if _, ok := vals[0].v.([]any); !ok {
			from.shaped = true
		}
	}
	if i, ok := subject(name); ok {
		switch {
		case !vals[i].few:
		case eventText(name, res, vals):
			// A template: the event's text is set in a literal's.
			from.mixed = true
		case vals[i].konst && name != "find_first" && name != "find_last":
			// The event only chose how a literal is cut, padded or
			// joined: the result is made of the literal's text.
			from.konst, from.few = true, true
		default:
			from.few = true
		}
	}
	if padded(name, res, vals) {
		// The padding is literal text beside the subject's.
		from.mixed = true
	}
	if picks(name) {
		from = from.picked()
	}
	return from
}

// merged returns the provenance of merge's result, given its arguments'
// taken together (from) and one by one: that of the arguments whose
// values it kept, as a later argument replaces an earlier one's value of
// the same key; what an argument whose values were all replaced read
// (missing or not) is no part of it. An argument that kept only some of
// its values is of the kind it was: its values are all of that kind,
// unless it is mixed. Its keys are its arguments' (shaped if one is).
func merged(from val, vals []val) val {
	last := map[string]int{}
	for i, x := range vals {
		m, _ := x.v.(map[string]any)
		for k := range m {
			last[k] = i
		}
	}
	kept := make([]bool, len(vals))
	for _, i := range last {
		kept[i] = true
	}
	out := val{konst: true, few: true, shaped: from.shaped}
	var kinds parts
	for i, x := range vals {
		if kept[i] {
			out = out.or(x)
			kinds.add(x)
		}
	}
	out.mixed = out.mixed || kinds.mixed()
	return out
}

// eventText reports whether res, the result of string function name
// whose subject is made of literals (and truth values), holds text of
// an argument read from the event: replace's replacement where it
// replaced, join's separator between two parts, pad's padding.
func eventText(name string, res any, vals []val) bool {
	switch name {
	case "replace", "pad_left", "pad_right":
		return len(vals) > 2 && !vals[2].few && res != vals[0].v
	case "join":
		list, _ := vals[1].v.([]any)
		return !vals[0].few && len(list) > 1
	}
	return false
}

// padded reports whether res, the result of function name, is its
// subject padded with a literal: the pad argument's, or the space pad
// takes when it is given none.
func padded(name string, res any, vals []val) bool {
	return (name == "pad_left" || name == "pad_right") && (len(vals) < 3 || vals[2].few) && res != vals[0].v
}

// subject returns the argument of string function name whose text the
// result is made of (the others are parameters: a separator, a pattern,
// a width).
func subject(name string) (int, bool) {
	switch name {
	case "replace", "split", "trim", "trim_left", "trim_right", "pad_left", "pad_right", "find_first", "find_last":
		return 0, true
	case "join":
		return 1, true
	}
	return 0, false
}

// picks reports whether function name returns one element of a list
// argument as it is.
func picks(name string) bool {
	switch name {
	case "max", "min", "max_by", "min_by", "values":
		return true
	}
	return false
}

// checkArgs checks args against the signature of function name, as the
// library's interpreter does, and says what is wrong without the value.
func checkArgs(name string, specs []jmespath.ArgSpec, args []any) error {
	if len(specs) == 0 {
		return nil
	}
	for i, a := range args {
		spec := specs[min(i, len(specs)-1)]
		if i >= len(specs) && !spec.Variadic {
			return evalErrorf("%s() called with %d arguments", name, len(args))
		}
		if !argMatches(spec, a) {
			return evalErrorf("%s() argument %d is %s; it takes %s", name, i+1, jsonKind(a), specKinds(spec))
		}
	}
	return nil
}

// argMatches reports whether arg has one of spec's types.
func argMatches(spec jmespath.ArgSpec, arg any) bool {
	for _, t := range spec.Types {
		switch t {
		case jmespath.JpAny:
			return true
		case jmespath.JpNumber:
			if _, ok := arg.(float64); ok {
				return true
			}
		case jmespath.JpString:
			if _, ok := arg.(string); ok {
				return true
			}
		case jmespath.JpArray, jmespath.JpArrayArray:
			if _, ok := arg.([]any); ok {
				return true
			}
		case jmespath.JpObject:
			if _, ok := arg.(map[string]any); ok {
				return true
			}
		case jmespath.JpArrayNumber:
			if _, ok := util.ToArrayNum(arg); ok {
				return true
			}
		case jmespath.JpArrayString:
			if _, ok := util.ToArrayStr(arg); ok {
				return true
			}
		case jmespath.JpExpref:
			if _, ok := arg.(func(any) (any, error)); ok {
				return true
			}
		}
	}
	return false
}

// floats returns v with every json.Number as the float64 JMESPath's
// functions and operators take, and reports whether one of them changed
// value on the way (its shortest float64 form has another value).
// Containers are copied, never changed.
func floats(v any) (any, bool) {
	switch x := v.(type) {
	case json.Number:
		f, err := strconv.ParseFloat(string(x), 64)
		lossy := err != nil || !sameDecimal(string(x), strconv.FormatFloat(f, 'g', -1, 64))
		if err != nil {
			f = 0
		}
		return f, lossy
	case []any:
		out := make([]any, len(x))
		lossy := false
		for i, y := range x {
			var l bool
			out[i], l = floats(y)
			lossy = lossy || l
		}
		return out, lossy
	case map[string]any:
		out := make(map[string]any, len(x))
		lossy := false
		for k, y := range x {
			var l bool
			out[k], l = floats(y)
			lossy = lossy || l
		}
		return out, lossy
	}
	return v, false
}

// sortedKeys returns the keys of m in order.
func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// decimal is a number in canonical decimal form: 0.digits × 10^exp, with
// no leading or trailing zeros in digits (zero has no digits).
type decimal struct {
	neg    bool
	digits string
	exp    int
}

// maxDecimalExp bounds the exponents parseDecimal accepts, so that no
// event can make a key of a billion digits.
const maxDecimalExp = 1 << 20

// parseDecimal parses a JSON number (or a float64's 'g' form).
func parseDecimal(s string) (decimal, bool) {
	var d decimal
	if strings.HasPrefix(s, "-") {
		d.neg, s = true, s[1:]
	}
	mant, expPart, hasExp := strings.Cut(strings.ToLower(s), "e")
	exp := 0
	if hasExp {
		e, err := strconv.Atoi(expPart)
		if err != nil || e > maxDecimalExp || e < -maxDecimalExp {
			return decimal{}, false
		}
		exp = e
	}
	intPart, frac, _ := strings.Cut(mant, ".")
	if intPart == "" && frac == "" {
		return decimal{}, false
	}
	digits := intPart + frac
	for _, c := range digits {
		if c < '0' || c > '9' {
			return decimal{}, false
		}
	}
	exp += len(intPart)
	trimmed := strings.TrimLeft(digits, "0")
	exp -= len(digits) - len(trimmed)
	trimmed = strings.TrimRight(trimmed, "0")
	if trimmed == "" {
		return decimal{}, true // zero, whatever its sign
	}
	d.digits, d.exp = trimmed, exp
	return d, true
}

// sameDecimal reports whether two decimal numbers have the same value.
func sameDecimal(a, b string) bool {
	x, ok1 := parseDecimal(a)
	y, ok2 := parseDecimal(b)
	return ok1 && ok2 && x == y
}

// wholeDecimal returns the whole number s in plain decimal ("1e3" is
// "1000", "-0" is "0"), or false when s is not a whole number.
func wholeDecimal(s string) (string, bool) {
	d, ok := parseDecimal(s)
	switch {
	case ok && d.digits == "":
		return "0", true
	case !ok || d.exp < len(d.digits) || d.exp > maxKeyDigits:
		return "", false
	}
	sign := ""
	if d.neg {
		sign = "-"
	}
	return sign + d.digits + strings.Repeat("0", d.exp-len(d.digits)), true
}

// maxKeyDigits bounds the digits of a whole number in a key.
const maxKeyDigits = 400

// decimalRat returns the value f's shortest decimal spells (what a JSON
// number of those digits means, as the evaluator reads one), or false for
// NaN and the infinities.
func decimalRat(f float64) (*big.Rat, bool) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return nil, false
	}
	return new(big.Rat).SetString(strconv.FormatFloat(f, 'g', -1, 64))
}

// exactArithmetic reports whether res, which float64 computed from a and
// b with op, is exact where exactness is owed: when a, b and the true
// result are whole numbers, res must be that result (2^53-1 + 2 - 2
// rounds to 2^53-2 through 2^53+1, as other operands do). Arithmetic with
// fractions is float64's, as JMESPath's (0.1 + 0.2 is
// 0.30000000000000004): its roundings need operands of 16 digits or more
// to meet.
func exactArithmetic(op any, a, b, res float64) bool {
	switch {
	case a != math.Trunc(a) || b != math.Trunc(b):
		return !math.IsInf(res, 0) && !math.IsNaN(res) // fractions: float64's
	case math.Abs(a) < 1<<53 && math.Abs(b) < 1<<53 && math.Abs(res) < 1<<53:
		// Whole operands and a result below 2^53: float64's +, -, *, /
		// and % are exact, and so is //, since a quotient of such
		// numbers that is not whole stays at least 1/|b| from every
		// whole number, farther than float64 rounds it.
		return true
	}
	x, ok1 := decimalRat(a)
	y, ok2 := decimalRat(b)
	r, ok3 := decimalRat(res)
	if !ok1 || !ok2 || !ok3 {
		return false
	}
	if !x.IsInt() || !y.IsInt() {
		return true
	}
	want := new(big.Rat)
	switch op {
	case parsing.TOKPlus:
		want.Add(x, y)
	case parsing.TOKMinus:
		want.Sub(x, y)
	case parsing.TOKStar, parsing.TOKMultiply:
		want.Mul(x, y)
	case parsing.TOKDivide, parsing.TOKModulo, parsing.TOKDiv:
		if y.Sign() == 0 {
			return false
		}
		want.Quo(x, y)
		if op != parsing.TOKDivide {
			// The quotient's whole part: floored for //, truncated
			// toward zero for % (math.Mod's sign is the dividend's).
			q := new(big.Int).Quo(want.Num(), want.Denom())
			if op == parsing.TOKDiv && want.Sign() < 0 && !want.IsInt() {
				q.Sub(q, big.NewInt(1))
			}
			want.SetInt(q)
			if op == parsing.TOKModulo {
				want.Sub(x, new(big.Rat).Mul(y, want))
			}
		}
	default:
		return false
	}
	return !want.IsInt() || want.Cmp(r) == 0
}

// magnitudes returns the sum of the magnitudes of list's numbers, and
// whether they are all whole.
func magnitudes(l []any) (float64, bool) {
	total := 0.0
	for _, x := range l {
		f, _ := x.(float64)
		if f != math.Trunc(f) {
			return 0, false
		}
		total += math.Abs(f)
	}
	return total, true
}

// exactSum reports, as exactArithmetic does, whether res, sum's or avg's
// float64 result over list, is exact where exactness is owed: over whole
// numbers, to a whole result.
func exactSum(name string, list any, res float64) bool {
	l, _ := list.([]any)
	if math.IsInf(res, 0) || math.IsNaN(res) {
		return false
	}
	if total, whole := magnitudes(l); !whole || total < 1<<53 {
		// Fractions are float64's; whole numbers whose magnitudes add
		// up to less than 2^53 have exact partial sums, and avg's
		// division is exact as exactArithmetic's.
		return true
	}
	r, ok := decimalRat(res)
	if !ok {
		return false
	}
	want := new(big.Rat)
	for _, x := range l {
		f, _ := x.(float64)
		d, ok := decimalRat(f)
		if !ok {
			return false
		}
		want.Add(want, d)
	}
	if name == "avg" && len(l) > 0 {
		want.Quo(want, new(big.Rat).SetInt64(int64(len(l))))
	}
	return !want.IsInt() || want.Cmp(r) == 0
}
