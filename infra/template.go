package infra

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/awslabs/goformation/v7/cloudformation/cloudwatch"
	cfndynamodb "github.com/awslabs/goformation/v7/cloudformation/dynamodb"
	"github.com/awslabs/goformation/v7/cloudformation/global"
	"github.com/awslabs/goformation/v7/cloudformation/iam"
	"github.com/awslabs/goformation/v7/cloudformation/serverless"
	"github.com/awslabs/goformation/v7/intrinsics"
	"gopkg.in/yaml.v3"
)

// TemplateFile is the name of the SAM template at the module root.
const TemplateFile = "template.yaml"

// Values Load gives the pseudo parameters. They match goformation's own
// choices where it has one.
const (
	pseudoAccountID = "123456789012"
	pseudoRegion    = "us-east-1"
	pseudoPartition = "aws"
	pseudoURLSuffix = "amazonaws.com"
	pseudoStackName = "goformation-stack"
	pseudoStackID   = "arn:aws:cloudformation:us-east-1:123456789012:stack/MyStack/1c2fa620-982a-11e3-aff7-50e2416294e0"
)

// Template is a parsed SAM template whose intrinsic functions have been
// resolved as [Load] describes. Typed access to a resource's properties
// goes through the Get...WithName methods, which decode them into
// goformation's model of that resource type.
type Template struct {
	// Path is the file the template was read from.
	Path string

	// Transform lists the template's transforms, such as
	// "AWS::Serverless-2016-10-31".
	Transform []string
	// Parameters are the template's parameter declarations.
	Parameters map[string]Parameter
	// Resources are the template's resources by logical id.
	Resources map[string]Resource
	// Outputs are the template's outputs, resolved.
	Outputs map[string]Output

	// conditions holds the value of each named condition.
	conditions map[string]bool
	// names is Options.Names.
	names map[string]string
	// doc is the resolved template as generic JSON values, for the parts
	// goformation models as ambiguous unions (event properties, policies).
	doc map[string]any
}

// Parameter is one parameter declaration of a template.
type Parameter struct {
	Type           string
	Description    string
	Default        any
	AllowedPattern string
	AllowedValues  []any
}

// Resource is one resource of a template: its type and the attributes
// beside its properties.
type Resource struct {
	Type                string
	Condition           string
	DeletionPolicy      string
	UpdateReplacePolicy string
}

// Output is one output of a template.
type Output struct {
	Description string
	Condition   string
	Value       any
}

// Options configures [LoadWithOptions]. A nil or zero Options loads the
// template with its parameter defaults and names every resource by its
// logical id.
type Options struct {
	// Parameters overrides parameter defaults, as sam deploy's
	// --parameter-overrides does. Each key must be a parameter of the
	// template; a value for a Number parameter must be a number.
	Parameters map[string]string

	// Names maps logical ids to physical names: what a Ref to the resource
	// yields, and the table name [Tables] gives it. A resource missing from
	// Names is named by its TableName property if it is a table that sets
	// one, and by its logical id otherwise.
	Names map[string]string
}

// Load reads and parses the SAM template at path with its parameter
// defaults. It is LoadWithOptions(path, nil).
func Load(path string) (*Template, error) {
	return LoadWithOptions(path, nil)
}

// LoadWithOptions reads and parses the SAM template at path, resolving its
// intrinsic functions offline, as follows:
//
//   - Ref to a parameter: the value from opts.Parameters, else the
//     parameter's default (no default and no value is an error wrapping
//     [ErrUnresolved]).
//   - Ref to a resource of the template: its physical name as described in
//     [Options.Names], which by default is the logical id. So
//     IDEMPOTENCY_TABLE: !Ref IdempotencyTable becomes "IdempotencyTable",
//     the name [Tables] gives that table by default.
//   - Ref to anything else, such as SAM's generated ServerlessHttpApi: the
//     placeholder "${Name}".
//   - Pseudo parameters: AWS::AccountId 123456789012, AWS::Region us-east-1,
//     AWS::Partition aws, AWS::URLSuffix amazonaws.com; AWS::NoValue is null
//     (the property is absent).
//   - Fn::GetAtt: the placeholder "${Resource.Attribute}", for example
//     "${IdempotencyTable.Arn}", since attributes exist only once deployed.
//   - Fn::Sub: each ${Name} and ${Resource.Attribute} replaced as above
//     (placeholders stay as they are), ${!Literal} becomes ${Literal}.
//   - Fn::If: the branch the named condition selects. Conditions are
//     evaluated from the parameter values; a condition that does not
//     evaluate to a boolean is an error wrapping [ErrUnresolved].
//   - Other functions as goformation resolves them.
//
// A resource whose Condition is false stays in the model, but [Tables]
// and [Functions] skip it; see [Template.Creates].
func LoadWithOptions(path string, opts *Options) (*Template, error) {
	if opts == nil {
		opts = &Options{}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load template: %w", err)
	}
	src, err := yamlToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("load template %s: %w", path, err)
	}
	overrides, err := parameterOverrides(src, opts.Parameters)
	if err != nil {
		return nil, fmt.Errorf("load template %s: %w", path, err)
	}
	raw, err := json.Marshal(src)
	if err != nil {
		return nil, fmt.Errorf("load template %s: %w", path, err)
	}

	r := &resolver{names: opts.Names}
	// Pass 1 evaluates the conditions; pass 2 uses them for Fn::If.
	first, err := intrinsics.ProcessJSON(raw, r.options(overrides, false))
	if err != nil {
		return nil, fmt.Errorf("resolve template %s: %w", path, err)
	}
	if r.conditions, r.tableNames, err = firstPass(first); err != nil {
		return nil, fmt.Errorf("resolve template %s: %w", path, err)
	}
	resolved, err := intrinsics.ProcessJSON(raw, r.options(overrides, true))
	if err != nil {
		return nil, fmt.Errorf("resolve template %s: %w", path, err)
	}
	if err := errors.Join(r.errs...); err != nil {
		return nil, fmt.Errorf("resolve template %s: %w", path, err)
	}

	var doc map[string]any
	if err := json.Unmarshal(resolved, &doc); err != nil {
		return nil, fmt.Errorf("parse template %s: %w", path, err)
	}
	stringifyEnv(doc)
	if resolved, err = json.Marshal(doc); err != nil {
		return nil, fmt.Errorf("parse template %s: %w", path, err)
	}
	t := &Template{Path: path, conditions: r.conditions, names: opts.Names, doc: doc}
	if err := t.parse(resolved); err != nil {
		return nil, fmt.Errorf("parse template %s: %w", path, err)
	}
	return t, nil
}

// parse fills the template's exported fields from the resolved JSON, and
// decodes every resource of a type that infra reads (tables and functions)
// and Globals.Function, so that a misspelled or mistyped property of those
// fails Load instead of reading as absent.
func (t *Template) parse(resolved []byte) error {
	var top struct {
		Transform  any
		Parameters map[string]Parameter
		Resources  map[string]Resource
		Outputs    map[string]Output
	}
	if err := json.Unmarshal(resolved, &top); err != nil {
		return err
	}
	switch tr := top.Transform.(type) {
	case nil:
	case string:
		t.Transform = []string{tr}
	case []any:
		for _, v := range tr {
			s, ok := v.(string)
			if !ok {
				return fmt.Errorf("Transform %v is not a list of names", tr)
			}
			t.Transform = append(t.Transform, s)
		}
	default:
		return fmt.Errorf("Transform %v is not a name or a list of names", tr)
	}
	t.Parameters, t.Resources, t.Outputs = top.Parameters, top.Resources, top.Outputs
	for _, id := range slices.Sorted(maps.Keys(t.Resources)) {
		var err error
		switch t.Resources[id].Type {
		case "":
			err = fmt.Errorf("resource %s has no Type", id)
		case typeTable:
			_, err = t.GetDynamoDBTableWithName(id)
		case typeFunction:
			_, err = t.GetServerlessFunctionWithName(id)
		}
		if err != nil {
			return err
		}
	}
	if g, ok := t.doc["Globals"].(map[string]any); ok && g["Function"] != nil {
		if _, err := t.GetServerlessGlobalFunction(); err != nil {
			return err
		}
	}
	return nil
}

// The resource types Load decodes.
const (
	typeTable    = "AWS::DynamoDB::Table"
	typeFunction = "AWS::Serverless::Function"
)

// GetDynamoDBTableWithName returns the AWS::DynamoDB::Table with the
// given logical id, in goformation's model.
func (t *Template) GetDynamoDBTableWithName(logicalID string) (*cfndynamodb.Table, error) {
	return resourceAs[cfndynamodb.Table](t, logicalID, typeTable)
}

// GetServerlessFunctionWithName returns the AWS::Serverless::Function with
// the given logical id, in goformation's model. Globals are not merged in;
// [Functions] merges them.
func (t *Template) GetServerlessFunctionWithName(logicalID string) (*serverless.Function, error) {
	return resourceAs[serverless.Function](t, logicalID, typeFunction)
}

// GetCloudWatchAlarmWithName returns the AWS::CloudWatch::Alarm with the
// given logical id, in goformation's model.
func (t *Template) GetCloudWatchAlarmWithName(logicalID string) (*cloudwatch.Alarm, error) {
	return resourceAs[cloudwatch.Alarm](t, logicalID, "AWS::CloudWatch::Alarm")
}

// GetIAMManagedPolicyWithName returns the AWS::IAM::ManagedPolicy with the
// given logical id, in goformation's model.
func (t *Template) GetIAMManagedPolicyWithName(logicalID string) (*iam.ManagedPolicy, error) {
	return resourceAs[iam.ManagedPolicy](t, logicalID, "AWS::IAM::ManagedPolicy")
}

// GetServerlessGlobalFunction returns the template's Globals.Function, in
// goformation's model.
func (t *Template) GetServerlessGlobalFunction() (*global.Function, error) {
	g, _ := t.doc["Globals"].(map[string]any)
	fn, ok := g["Function"]
	if !ok {
		return nil, errors.New("the template has no Globals.Function")
	}
	return decodeAs[global.Function](fn, "Globals.Function")
}

// resourceAs decodes the resolved resource logicalID, which must be of
// type typ, into T: one of goformation's resource types, whose decoder
// refuses unknown properties.
func resourceAs[T any](t *Template, logicalID, typ string) (*T, error) {
	res, ok := t.resource(logicalID)
	if !ok || res["Type"] != typ {
		return nil, fmt.Errorf("the template has no %s %s", typ, logicalID)
	}
	return decodeAs[T](res, typ+" "+logicalID)
}

// decodeAs decodes a resolved JSON value into T; what names the value in
// an error.
func decodeAs[T any](v any, what string) (*T, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	out := new(T)
	if err := json.Unmarshal(raw, out); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

// Creates reports whether the template creates the resource with the given
// logical id under the loaded parameter values: the resource exists and
// has no Condition, or its Condition is true.
func (t *Template) Creates(logicalID string) bool {
	res, ok := t.resource(logicalID)
	if !ok {
		return false
	}
	cond, _ := res["Condition"].(string)
	return cond == "" || t.conditions[cond]
}

// Condition returns the value of the named condition under the loaded
// parameter values, and whether the template declares it.
func (t *Template) Condition(name string) (value, ok bool) {
	value, ok = t.conditions[name]
	return value, ok
}

// resource returns the resolved JSON of a resource.
func (t *Template) resource(logicalID string) (map[string]any, bool) {
	resources, _ := t.doc["Resources"].(map[string]any)
	res, ok := resources[logicalID].(map[string]any)
	return res, ok
}

// ModuleRoot returns the nearest directory at or above the working
// directory that holds a go.mod file, or an error wrapping
// [ErrNoModuleRoot] when there is none.
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find module root: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		} else if !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("find module root: %w", err)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", ErrNoModuleRoot
		}
		dir = parent
	}
}

// FindTemplate returns the path of template.yaml in the module root (see
// ModuleRoot). It fails with an error wrapping [ErrNoModuleRoot] when there
// is no module root, and wrapping fs.ErrNotExist when the module root has
// no template.yaml.
func FindTemplate() (string, error) {
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	path := filepath.Join(root, TemplateFile)
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("find template: %w", err)
	}
	return path, nil
}

// yamlToJSON decodes a YAML template into generic JSON values, turning the
// short-form intrinsic tags (!Ref, !Sub, !GetAtt, ...) into their long
// form. It does what goformation's ProcessYAML does, without the package
// state ProcessYAML mutates on every call (which makes concurrent loads
// race).
func yamlToJSON(data []byte) (map[string]any, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, fmt.Errorf("invalid YAML: %w", err)
	}
	v, err := yamlValue(&root)
	if err != nil {
		return nil, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("invalid template: the top level is not a mapping")
	}
	return m, nil
}

// yamlValue converts one YAML node.
func yamlValue(n *yaml.Node) (any, error) {
	var v any
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return nil, nil
		}
		return yamlValue(n.Content[0])
	case yaml.AliasNode:
		return yamlValue(n.Alias)
	case yaml.MappingNode:
		m := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			val, err := yamlValue(n.Content[i+1])
			if err != nil {
				return nil, err
			}
			m[n.Content[i].Value] = val
		}
		v = m
	case yaml.SequenceNode:
		s := make([]any, 0, len(n.Content))
		for _, c := range n.Content {
			val, err := yamlValue(c)
			if err != nil {
				return nil, err
			}
			s = append(s, val)
		}
		v = s
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!str", "!!timestamp", "!!binary", "":
			v = n.Value
		case "!!int", "!!float", "!!bool", "!!null":
			if err := n.Decode(&v); err != nil {
				return nil, fmt.Errorf("line %d: %w", n.Line, err)
			}
		default: // a short-form intrinsic's argument
			v = n.Value
		}
	}
	if tag, ok := strings.CutPrefix(n.Tag, "!"); ok && !strings.HasPrefix(tag, "!") {
		switch tag {
		case "Ref", "Condition":
		default:
			tag = "Fn::" + tag
		}
		return map[string]any{tag: v}, nil
	}
	return v, nil
}

// parameterOverrides checks opts.Parameters against the template's
// parameters and converts values of Number parameters to numbers.
func parameterOverrides(src map[string]any, params map[string]string) (map[string]any, error) {
	if len(params) == 0 {
		return nil, nil
	}
	declared, _ := src["Parameters"].(map[string]any)
	names := make([]string, 0, len(params))
	for name := range params {
		names = append(names, name)
	}
	sort.Strings(names)
	out := make(map[string]any, len(params))
	for _, name := range names {
		p, ok := declared[name].(map[string]any)
		if !ok {
			return nil, fmt.Errorf("parameter %q: %w", name, ErrUnknownParameter)
		}
		if p["Type"] == "Number" {
			f, err := strconv.ParseFloat(params[name], 64)
			if err != nil {
				return nil, fmt.Errorf("parameter %q is a Number: %w", name, err)
			}
			out[name] = f
			continue
		}
		out[name] = params[name]
	}
	return out, nil
}

// stringifyEnv turns numbers and booleans in functions' environment
// variables into strings. A Ref to a Number parameter resolves to a number,
// which suits numeric properties (goformation wants numbers there), but
// Lambda environment values are strings, as CloudFormation makes them.
func stringifyEnv(doc map[string]any) {
	fix := func(fn any) {
		props, _ := fn.(map[string]any)
		env, _ := props["Environment"].(map[string]any)
		vars, _ := env["Variables"].(map[string]any)
		for k, v := range vars {
			switch v.(type) {
			case float64, bool:
				vars[k], _ = scalarString(v)
			}
		}
	}
	if g, ok := doc["Globals"].(map[string]any); ok {
		fix(g["Function"])
	}
	resources, _ := doc["Resources"].(map[string]any)
	for _, r := range resources {
		if res, ok := r.(map[string]any); ok {
			switch res["Type"] {
			case "AWS::Serverless::Function", "AWS::Lambda::Function":
				fix(res["Properties"])
			}
		}
	}
}

// firstPass reads what the second pass needs from the first: the value of
// each condition, and the TableName of each table that sets one (which may
// itself use Fn::Sub).
func firstPass(processed []byte) (map[string]bool, map[string]string, error) {
	var doc struct {
		Conditions map[string]any
		Resources  map[string]struct {
			Type       string
			Properties struct{ TableName any }
		}
	}
	if err := json.Unmarshal(processed, &doc); err != nil {
		return nil, nil, err
	}
	conds := make(map[string]bool, len(doc.Conditions))
	for name, v := range doc.Conditions {
		b, ok := v.(bool)
		if !ok {
			return nil, nil, fmt.Errorf("condition %q: %w", name, ErrUnresolved)
		}
		conds[name] = b
	}
	names := map[string]string{}
	for id, res := range doc.Resources {
		if n, ok := res.Properties.TableName.(string); ok && n != "" && res.Type == "AWS::DynamoDB::Table" {
			names[id] = n
		}
	}
	return conds, names, nil
}

// resolver holds the intrinsic function handlers Load installs, and the
// errors they meet (a handler cannot return one).
type resolver struct {
	names      map[string]string // Options.Names
	tableNames map[string]string // TableName properties, after pass 1
	conditions map[string]bool   // after pass 1
	errs       []error
}

// options returns goformation processor options using r's handlers.
func (r *resolver) options(overrides map[string]any, withIf bool) *intrinsics.ProcessorOptions {
	h := map[string]intrinsics.IntrinsicHandler{
		"Ref":        r.ref,
		"Fn::GetAtt": r.getAtt,
		"Fn::Sub":    r.sub,
	}
	if withIf {
		h["Fn::If"] = r.fnIf
	}
	return &intrinsics.ProcessorOptions{IntrinsicHandlerOverrides: h, ParameterOverrides: overrides}
}

// ref resolves {"Ref": name}.
func (r *resolver) ref(_ string, input any, template any) any {
	name, ok := input.(string)
	if !ok {
		r.errs = append(r.errs, fmt.Errorf("Ref %v: %w", input, ErrUnresolved))
		return nil
	}
	return r.lookup(name, template)
}

// lookup resolves a name as Ref does.
func (r *resolver) lookup(name string, template any) any {
	switch name {
	case "AWS::AccountId":
		return pseudoAccountID
	case "AWS::Region":
		return pseudoRegion
	case "AWS::Partition":
		return pseudoPartition
	case "AWS::URLSuffix":
		return pseudoURLSuffix
	case "AWS::StackName":
		return pseudoStackName
	case "AWS::StackId":
		return pseudoStackID
	case "AWS::NotificationARNs":
		return []any{}
	case "AWS::NoValue":
		return nil
	}
	doc, _ := template.(map[string]any)
	params, _ := doc["Parameters"].(map[string]any)
	if p, ok := params[name].(map[string]any); ok {
		def, ok := p["Default"]
		if !ok {
			r.errs = append(r.errs, fmt.Errorf("parameter %q has no default and no value in Options.Parameters: %w", name, ErrUnresolved))
		}
		return def
	}
	resources, _ := doc["Resources"].(map[string]any)
	if res, ok := resources[name].(map[string]any); ok {
		if n, ok := r.names[name]; ok {
			return n
		}
		if n, ok := r.tableNames[name]; ok {
			return n
		}
		if res["Type"] == "AWS::DynamoDB::Table" {
			props, _ := res["Properties"].(map[string]any)
			if n, ok := props["TableName"].(string); ok && n != "" {
				return n
			}
		}
		return name
	}
	return "${" + name + "}"
}

// getAtt resolves {"Fn::GetAtt": ["Resource", "Attribute"]} or
// {"Fn::GetAtt": "Resource.Attribute"} to the placeholder
// "${Resource.Attribute}".
func (r *resolver) getAtt(_ string, input any, _ any) any {
	switch v := input.(type) {
	case string:
		return "${" + v + "}"
	case []any:
		parts := make([]string, 0, len(v))
		for _, p := range v {
			s, ok := p.(string)
			if !ok {
				r.errs = append(r.errs, fmt.Errorf("Fn::GetAtt %v: %w", input, ErrUnresolved))
				return nil
			}
			parts = append(parts, s)
		}
		return "${" + strings.Join(parts, ".") + "}"
	}
	r.errs = append(r.errs, fmt.Errorf("Fn::GetAtt %v: %w", input, ErrUnresolved))
	return nil
}

// subVar matches a ${...} reference in an Fn::Sub string.
var subVar = regexp.MustCompile(`\$\{([^}]*)\}`)

// sub resolves {"Fn::Sub": "string"} and {"Fn::Sub": ["string", {vars}]}.
func (r *resolver) sub(_ string, input any, template any) any {
	var (
		src  string
		vars map[string]any
	)
	switch v := input.(type) {
	case string:
		src = v
	case []any:
		if len(v) == 2 {
			src, _ = v[0].(string)
			vars, _ = v[1].(map[string]any)
		}
		if src == "" {
			r.errs = append(r.errs, fmt.Errorf("Fn::Sub %v: %w", input, ErrUnresolved))
			return nil
		}
	default:
		r.errs = append(r.errs, fmt.Errorf("Fn::Sub %v: %w", input, ErrUnresolved))
		return nil
	}
	return subVar.ReplaceAllStringFunc(src, func(m string) string {
		name := m[2 : len(m)-1]
		if lit, ok := strings.CutPrefix(name, "!"); ok {
			return "${" + lit + "}"
		}
		var v any
		if val, ok := vars[name]; ok {
			v = val
		} else if strings.Contains(name, ".") {
			return m // an attribute: keep the placeholder
		} else {
			v = r.lookup(name, template)
		}
		switch v := v.(type) {
		case string:
			return v
		case float64:
			return strconv.FormatFloat(v, 'f', -1, 64)
		case bool:
			return strconv.FormatBool(v)
		}
		return m
	})
}

// fnIf resolves {"Fn::If": ["Condition", ifTrue, ifFalse]}.
func (r *resolver) fnIf(_ string, input any, _ any) any {
	args, ok := input.([]any)
	if ok && len(args) == 3 {
		if name, ok := args[0].(string); ok {
			if v, ok := r.conditions[name]; ok {
				if v {
					return args[1]
				}
				return args[2]
			}
		}
	}
	r.errs = append(r.errs, fmt.Errorf("Fn::If %v: %w", input, ErrUnresolved))
	return nil
}
