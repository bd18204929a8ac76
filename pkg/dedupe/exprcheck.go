package dedupe

import (
	"encoding/json"
	"fmt"
	"strings"

	jmespath "github.com/jmespath-community/go-jmespath"
	"github.com/jmespath-community/go-jmespath/pkg/parsing"
)

// kinds is a set of the kinds of value an expression may produce.
type kinds uint8

const (
	kNull kinds = 1 << iota
	kBool
	kNumber
	kString
	kArray
	kObject
	kExpref

	kData = kNull | kBool | kNumber | kString | kArray | kObject
)

var kindNames = []string{"null", "a boolean", "a number", "a string", "a list", "an object", "an expression reference (&)"}

// String names the kinds in k: "a string or null".
func (k kinds) String() string {
	if k&kData == kData {
		if k&kExpref != 0 {
			return "a value or an expression reference"
		}
		return "a JSON value"
	}
	var names []string
	for i, n := range kindNames {
		if k&(1<<i) != 0 {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return "nothing"
	}
	return strings.Join(names, " or ")
}

// kindBit returns the kind of a value.
func kindBit(v any) kinds {
	switch v.(type) {
	case nil:
		return kNull
	case bool:
		return kBool
	case float64:
		return kNumber
	case string:
		return kString
	case []any:
		return kArray
	case map[string]any:
		return kObject
	case json.Number:
		return kNumber
	case func(any) (any, error):
		return kExpref
	}
	return 0
}

// jsonKind names the kind of a value, never the value.
func jsonKind(v any) string {
	if k := kindBit(v); k != 0 {
		return k.String()
	}
	return fmt.Sprintf("a %T", v)
}

// specMask returns the kinds an argument spec accepts.
func specMask(spec jmespath.ArgSpec) kinds {
	var k kinds
	for _, t := range spec.Types {
		switch t {
		case jmespath.JpAny:
			k |= kData
		case jmespath.JpNumber:
			k |= kNumber
		case jmespath.JpString:
			k |= kString
		case jmespath.JpArray, jmespath.JpArrayArray, jmespath.JpArrayNumber, jmespath.JpArrayString:
			k |= kArray
		case jmespath.JpObject:
			k |= kObject
		case jmespath.JpExpref:
			k |= kExpref
		}
	}
	return k
}

// specKinds names what an argument spec accepts.
func specKinds(spec jmespath.ArgSpec) string {
	names := make([]string, len(spec.Types))
	for i, t := range spec.Types {
		switch t {
		case jmespath.JpAny:
			names[i] = "any value"
		case jmespath.JpArrayNumber:
			names[i] = "a list of numbers"
		case jmespath.JpArrayString:
			names[i] = "a list of strings"
		case jmespath.JpArrayArray:
			names[i] = "a list of lists"
		default:
			names[i] = specMask(jmespath.ArgSpec{Types: []jmespath.JpType{t}}).String()
		}
	}
	return strings.Join(names, " or ")
}

// returnKinds is what each function may return (null included for all:
// a wider set only makes fewer expressions refused at construction).
var returnKinds = map[string]kinds{
	"abs": kNumber, "ceil": kNumber, "floor": kNumber, "length": kNumber, "sum": kNumber,
	"avg": kNumber, "find_first": kNumber, "find_last": kNumber, "to_number": kNumber,
	"contains": kBool, "ends_with": kBool, "starts_with": kBool,
	"from_items": kObject, "group_by": kObject, "merge": kObject,
	"items": kArray, "keys": kArray, "values": kArray, "map": kArray, "sort": kArray,
	"sort_by": kArray, "split": kArray, "to_array": kArray, "zip": kArray,
	"join": kString, "lower": kString, "upper": kString, "pad_left": kString, "pad_right": kString,
	"replace": kString, "to_string": kString, "trim": kString, "trim_left": kString,
	"trim_right": kString, "type": kString, "powertools_base64": kString, "powertools_base64_gzip": kString,
	"max": kNumber | kString, "min": kNumber | kString, "reverse": kArray | kString,
}

// shape is what compileExpr knows of an expression without an event.
type shape struct {
	kinds      kinds // what it may produce
	readsInput bool  // depends on the value it is evaluated on
	readsRoot  bool  // depends on $ or a variable
}

// readsEvent reports whether an expression evaluated on an event depends
// on it at all.
func (s shape) readsEvent() bool { return s.readsInput || s.readsRoot }

// analyze checks an expression as far as it can be checked without an
// event, and returns its shape. It refuses, naming the function and the
// argument: an unknown function; a call with too few or too many
// arguments (a variadic one needs at least one); an argument that can
// never have a type the function takes (lower({a: a}), join(',', `1`));
// a variable that is not bound; and a call that reads nothing of the
// event and fails (abs('x')), since it would fail on every event.
func analyze(n parsing.ASTNode, funcs map[string]jmespath.FunctionEntry, vars map[string]bool) (shape, error) {
	sub := func(i int) (shape, error) { return analyze(n.Children[i], funcs, vars) }
	all := func(start int) ([]shape, error) {
		var out []shape
		for i := start; i < len(n.Children); i++ {
			s, err := sub(i)
			if err != nil {
				return nil, err
			}
			out = append(out, s)
		}
		return out, nil
	}
	switch n.NodeType {
	case parsing.ASTLiteral:
		return shape{kinds: kindBit(n.Value)}, nil
	case parsing.ASTField, parsing.ASTIndex, parsing.ASTIdentity, parsing.ASTCurrentNode:
		return shape{kinds: kData, readsInput: true}, nil
	case parsing.ASTSlice:
		return shape{kinds: kArray | kString | kNull, readsInput: true}, nil
	case parsing.ASTRootNode:
		return shape{kinds: kData, readsRoot: true}, nil
	case parsing.ASTVariable:
		if !vars[n.Value.(string)] {
			return shape{}, fmt.Errorf("variable %s is not defined", n.Value)
		}
		return shape{kinds: kData, readsRoot: true}, nil
	case parsing.ASTSubexpression, parsing.ASTIndexExpression, parsing.ASTPipe,
		parsing.ASTProjection, parsing.ASTValueProjection, parsing.ASTFilterProjection, parsing.ASTFlatten:
		ss, err := all(0)
		if err != nil {
			return shape{}, err
		}
		s := shape{readsInput: ss[0].readsInput}
		for _, c := range ss {
			s.readsRoot = s.readsRoot || c.readsRoot
		}
		switch n.NodeType {
		case parsing.ASTSubexpression, parsing.ASTIndexExpression:
			s.kinds = ss[1].kinds | ss[0].kinds&kNull
		case parsing.ASTPipe:
			s.kinds = ss[len(ss)-1].kinds
		default:
			s.kinds = kArray | kNull | kString
		}
		return s, nil
	case parsing.ASTMultiSelectList, parsing.ASTMultiSelectHash, parsing.ASTKeyValPair,
		parsing.ASTOrExpression, parsing.ASTAndExpression, parsing.ASTNotExpression,
		parsing.ASTComparator, parsing.ASTArithmeticExpression, parsing.ASTArithmeticUnaryExpression:
		ss, err := all(0)
		if err != nil {
			return shape{}, err
		}
		var s shape
		for _, c := range ss {
			s.readsInput = s.readsInput || c.readsInput
			s.readsRoot = s.readsRoot || c.readsRoot
			s.kinds |= c.kinds
		}
		switch n.NodeType {
		case parsing.ASTMultiSelectList:
			s.kinds = kArray
		case parsing.ASTMultiSelectHash:
			s.kinds = kObject
			seen := make(map[string]bool, len(n.Children))
			for _, c := range n.Children {
				k, _ := c.Value.(string)
				if seen[k] {
					// The last value named k would replace the others:
					// what they read would be no part of the result.
					return shape{}, fmt.Errorf("an object names the key %q twice; name each key once", k)
				}
				seen[k] = true
			}
		case parsing.ASTNotExpression:
			s.kinds = kBool
		case parsing.ASTComparator:
			s.kinds = kBool | kNull
		case parsing.ASTArithmeticExpression, parsing.ASTArithmeticUnaryExpression:
			s.kinds = kNumber | kNull
		}
		return s, nil
	case parsing.ASTExpRef:
		body, err := sub(0)
		if err != nil {
			return shape{}, err
		}
		return shape{kinds: kExpref, readsRoot: body.readsRoot}, nil
	case parsing.ASTLetExpression:
		inner := make(map[string]bool, len(vars)+len(n.Children[0].Children))
		for k := range vars {
			inner[k] = true
		}
		var s shape
		for _, b := range n.Children[0].Children {
			bs, err := analyze(b.Children[1], funcs, vars)
			if err != nil {
				return shape{}, err
			}
			s.readsInput = s.readsInput || bs.readsInput
			s.readsRoot = s.readsRoot || bs.readsRoot
			inner[b.Children[0].Value.(string)] = true
		}
		body, err := analyze(n.Children[1], funcs, inner)
		if err != nil {
			return shape{}, err
		}
		return shape{kinds: body.kinds, readsInput: s.readsInput || body.readsInput, readsRoot: true}, nil
	case parsing.ASTFunctionExpression:
		return analyzeCall(n, funcs, vars)
	}
	return shape{}, fmt.Errorf("unsupported expression node %s", n.NodeType)
}

// analyzeCall checks a function call (see analyze).
func analyzeCall(n parsing.ASTNode, funcs map[string]jmespath.FunctionEntry, vars map[string]bool) (shape, error) {
	name, _ := n.Value.(string)
	f, ok := funcs[name]
	if !ok {
		return shape{}, fmt.Errorf("unknown function %s()", name)
	}
	// Every argument but an optional one is required, a variadic one
	// included: not_null() and merge() fail on every event.
	least, most := 0, len(f.Arguments)
	for _, a := range f.Arguments {
		if !a.Optional {
			least++
		}
		if a.Variadic {
			most = -1
		}
	}
	if c := len(n.Children); c < least || (most >= 0 && c > most) {
		want := fmt.Sprintf("%d", least)
		switch {
		case most < 0:
			want = fmt.Sprintf("at least %d", least)
		case most != least:
			want = fmt.Sprintf("%d to %d", least, most)
		}
		return shape{}, fmt.Errorf("%s() called with %d arguments; it takes %s", name, c, want)
	}
	s := shape{kinds: returnKinds[name] | kNull}
	if k, ok := returnKinds[name]; !ok || k == 0 {
		s.kinds = kData
	}
	var argKinds kinds
	for i, c := range n.Children {
		cs, err := analyze(c, funcs, vars)
		if err != nil {
			return shape{}, err
		}
		if len(f.Arguments) > 0 {
			spec := f.Arguments[min(i, len(f.Arguments)-1)]
			if cs.kinds&specMask(spec) == 0 {
				return shape{}, fmt.Errorf("%s() argument %d is always %s; it takes %s", name, i+1, cs.kinds, specKinds(spec))
			}
		}
		argKinds |= cs.kinds
		s.readsInput = s.readsInput || cs.readsInput
		s.readsRoot = s.readsRoot || cs.readsRoot
	}
	if name == "not_null" {
		s.kinds = argKinds | kNull
	}
	if !s.readsEvent() {
		// It reads nothing of the event: what it does now, it does on
		// every event.
		e := evaluator{funcs: funcs}
		if _, err := e.eval(n, val{}); err != nil {
			return shape{}, fmt.Errorf("fails on every event: %w", err)
		}
	}
	return s, nil
}
