package infra

import (
	"encoding/json"
	"fmt"
	"maps"
	"sort"
	"strconv"
	"strings"
	"time"
)

// SAM's defaults for settings a template leaves out.
const (
	// DefaultTimeout is a function's timeout when neither the function nor
	// Globals sets one.
	DefaultTimeout = 3 * time.Second
	// DefaultMemorySize is a function's memory in MB when neither the
	// function nor Globals sets it.
	DefaultMemorySize = 128
	// DefaultIntegrationTimeout is how long API Gateway waits for an
	// HttpApi integration when the event sets no TimeoutInMillis; it is
	// also the most an HTTP API allows.
	DefaultIntegrationTimeout = 30 * time.Second
	// DefaultPayloadFormatVersion is the payload format of an HttpApi event
	// that sets none.
	DefaultPayloadFormatVersion = "2.0"
)

// Function is one AWS::Serverless::Function of the template, with the
// template's Globals merged in the way SAM merges them: the function's own
// settings override Globals, and environment variables are merged by
// name.
type Function struct {
	// LogicalID is the function's logical id, e.g. "ApiFunction".
	LogicalID string
	// Runtime, Handler and Architectures are as declared, e.g.
	// "provided.al2023", "bootstrap" and ["arm64"].
	Runtime       string
	Handler       string
	Architectures []string
	// CodeURI is the CodeUri when it is a path, "" otherwise.
	CodeURI string
	// BuildMethod is the resource's Metadata BuildMethod, e.g. "makefile".
	BuildMethod string
	// Timeout is the function's timeout; DefaultTimeout when unset.
	Timeout time.Duration
	// MemorySize is the memory in MB; DefaultMemorySize when unset.
	MemorySize int
	// Tracing is the X-Ray tracing mode, "" when unset.
	Tracing string
	// Env holds the environment variables, resolved as Load describes: a
	// table reference holds the table's name as Tables gives it (by default
	// its logical id). Never nil.
	Env map[string]string
	// Routes are the HttpApi events, sorted by event name.
	Routes []Route
	// Schedules are the Schedule and ScheduleV2 events, sorted by event
	// name. Other event types are not listed.
	Schedules []Schedule
	// Statements are the statements of the inline policy documents in
	// Policies, in template order.
	Statements []Statement
	// ManagedPolicies lists every other entry of Policies: managed policy
	// names or ARNs, and the names of SAM policy templates (such as
	// "DynamoDBCrudPolicy"). SAM's implicit policies (basic execution,
	// X-Ray) are not listed.
	ManagedPolicies []string
}

// Route is an HttpApi event: one route of the stack's HTTP API.
type Route struct {
	// Event is the event's name in the template, e.g. "CreatePayment".
	Event string
	// Method is the upper-case HTTP method, or "ANY".
	Method string
	// Path is the route path with its {parameters} and an optional
	// greedy {proxy+}. Empty for the catch-all $default route.
	Path string
	// PayloadFormatVersion is "2.0" or "1.0".
	PayloadFormatVersion string
	// Timeout is the integration timeout (TimeoutInMillis), by default
	// DefaultIntegrationTimeout.
	Timeout time.Duration
	// Auth is the route's authorizer, resolved as SAM resolves it: the
	// event's Auth.Authorizer ("NONE" for none), else the API's
	// DefaultAuthorizer (from the AWS::Serverless::HttpApi the event's
	// ApiId names, or Globals.HttpApi for the implicit API), else none.
	Auth RouteAuth
}

// Authorizer types of a RouteAuth.
const (
	// AuthIAM is the AWS_IAM authorizer: SigV4-signed requests only.
	AuthIAM = "AWS_IAM"
	// AuthJWT is a JWT authorizer (JwtConfiguration).
	AuthJWT = "JWT"
	// AuthLambda is a Lambda authorizer (FunctionArn).
	AuthLambda = "REQUEST"
)

// RouteAuth is a route's authorizer. The zero value is none: the route is
// open to anyone who can reach the API.
type RouteAuth struct {
	// Name is the authorizer's name in the template: "AWS_IAM", or a key
	// of the API's Auth.Authorizers. Empty for none.
	Name string
	// Type is AuthIAM, AuthJWT or AuthLambda; empty for none.
	Type string
	// Issuer and Audience are a JWT authorizer's JwtConfiguration.
	Issuer   string
	Audience []string
}

// httpAPIAuth is the Auth property of an AWS::Serverless::HttpApi (or of
// Globals.HttpApi).
type httpAPIAuth struct {
	DefaultAuthorizer   string
	EnableIamAuthorizer bool
	Authorizers         map[string]httpAuthorizer
}

// httpAuthorizer is one entry of an HttpApi's Auth.Authorizers.
type httpAuthorizer struct {
	FunctionArn      any
	JwtConfiguration *struct {
		Issuer   any
		Audience any
	}
}

// merged returns a over base, as SAM merges an HttpApi's Auth over
// Globals.HttpApi.Auth (a map's keys merge; other values override).
func (a *httpAPIAuth) merged(base *httpAPIAuth) *httpAPIAuth {
	switch {
	case a == nil:
		return base
	case base == nil:
		return a
	}
	out := *base
	if a.DefaultAuthorizer != "" {
		out.DefaultAuthorizer = a.DefaultAuthorizer
	}
	out.EnableIamAuthorizer = out.EnableIamAuthorizer || a.EnableIamAuthorizer
	if len(a.Authorizers) > 0 {
		out.Authorizers = maps.Clone(base.Authorizers)
		if out.Authorizers == nil {
			out.Authorizers = maps.Clone(a.Authorizers)
		}
		maps.Copy(out.Authorizers, a.Authorizers)
	}
	return &out
}

// routeAuth resolves the authorizer named name ("" for the API's
// default) on an API whose Auth is api.
func routeAuth(name string, api *httpAPIAuth) (RouteAuth, error) {
	if name == "" && api != nil {
		name = api.DefaultAuthorizer
	}
	if name == "" || name == "NONE" {
		return RouteAuth{}, nil
	}
	if name == AuthIAM {
		if api == nil || !api.EnableIamAuthorizer {
			return RouteAuth{}, fmt.Errorf("authorizer AWS_IAM needs EnableIamAuthorizer: true in the HttpApi's Auth")
		}
		return RouteAuth{Name: name, Type: AuthIAM}, nil
	}
	var def httpAuthorizer
	var ok bool
	if api != nil {
		def, ok = api.Authorizers[name]
	}
	switch {
	case !ok:
		return RouteAuth{}, fmt.Errorf("authorizer %q is not declared in the HttpApi's Auth.Authorizers", name)
	case def.JwtConfiguration != nil:
		iss, _ := scalarString(def.JwtConfiguration.Issuer)
		return RouteAuth{Name: name, Type: AuthJWT, Issuer: iss, Audience: strings1(def.JwtConfiguration.Audience)}, nil
	case def.FunctionArn != nil:
		return RouteAuth{Name: name, Type: AuthLambda}, nil
	}
	return RouteAuth{}, fmt.Errorf("authorizer %q has neither JwtConfiguration nor FunctionArn", name)
}

// RouteKey returns the route key as API Gateway writes it, e.g.
// "GET /payments/{id}", or "$default" for the catch-all route.
func (r Route) RouteKey() string {
	if r.Path == "" {
		return "$default"
	}
	return r.Method + " " + r.Path
}

// Schedule is a Schedule (EventBridge rule) or ScheduleV2 (EventBridge
// Scheduler) event.
type Schedule struct {
	// Event is the event's name in the template, e.g. "Sweep".
	Event string
	// Expression is the schedule expression, e.g. "rate(5 minutes)".
	Expression string
	// Enabled is false only when the event disables itself.
	Enabled bool
	// Input is the fixed JSON input the event sends, "" for the default
	// scheduled-event payload.
	Input string
}

// Rate returns the interval of a rate(...) expression. A cron(...) or
// at(...) expression is an error.
func (s Schedule) Rate() (time.Duration, error) {
	inner, ok := strings.CutPrefix(s.Expression, "rate(")
	if inner, ok = strings.CutSuffix(inner, ")"); !ok {
		return 0, fmt.Errorf("schedule %q is not a rate expression", s.Expression)
	}
	num, unit, ok := strings.Cut(strings.TrimSpace(inner), " ")
	n, err := strconv.Atoi(num)
	if !ok || err != nil || n <= 0 {
		return 0, fmt.Errorf("schedule %q: bad rate value", s.Expression)
	}
	var d time.Duration
	switch strings.TrimSpace(unit) {
	case "minute", "minutes":
		d = time.Minute
	case "hour", "hours":
		d = time.Hour
	case "day", "days":
		d = 24 * time.Hour
	default:
		return 0, fmt.Errorf("schedule %q: bad rate unit", s.Expression)
	}
	return time.Duration(n) * d, nil
}

// Statement is one statement of an inline IAM policy. Actions and
// Resources are as written, in template order, with Fn::GetAtt attributes
// as placeholders: "${IdempotencyTable.Arn}".
type Statement struct {
	Sid       string
	Effect    string
	Actions   []string
	Resources []string
}

// samFunction is the subset of an AWS::Serverless::Function's properties
// (and of Globals.Function) that Functions reads.
type samFunction struct {
	Runtime       *string
	Handler       *string
	Architectures []string
	CodeUri       any
	Timeout       *float64
	MemorySize    *float64
	Tracing       *string
	Environment   *struct {
		Variables map[string]any
	}
	Events   map[string]samEvent
	Policies any
}

// samEvent is an entry of a function's Events.
type samEvent struct {
	Type       string
	Properties struct {
		Method               string
		Path                 string
		PayloadFormatVersion string
		TimeoutInMillis      *float64
		Schedule             string
		ScheduleExpression   string
		Enabled              *bool
		State                string
		Input                string
		ApiId                any
		Auth                 *struct {
			Authorizer string
		}
	}
}

// Functions returns every AWS::Serverless::Function the template creates
// (see [Template.Creates]), sorted by logical id.
func Functions(t *Template) ([]Function, error) {
	var global samFunction
	var globalAPI struct{ Auth *httpAPIAuth }
	if g, ok := t.doc["Globals"].(map[string]any); ok {
		if err := remarshal(g["Function"], &global); err != nil {
			return nil, fmt.Errorf("read Globals.Function: %w", err)
		}
		if err := remarshal(g["HttpApi"], &globalAPI); err != nil {
			return nil, fmt.Errorf("read Globals.HttpApi: %w", err)
		}
	}
	resources, _ := t.doc["Resources"].(map[string]any)
	// The Auth of every HTTP API: "" is the implicit one.
	apis := map[string]*httpAPIAuth{"": globalAPI.Auth}
	for id, r := range resources {
		if res, ok := r.(map[string]any); ok && res["Type"] == "AWS::Serverless::HttpApi" {
			var p struct{ Auth *httpAPIAuth }
			if err := remarshal(res["Properties"], &p); err != nil {
				return nil, fmt.Errorf("read HttpApi %s: %w", id, err)
			}
			apis[id] = p.Auth.merged(globalAPI.Auth)
		}
	}
	ids := make([]string, 0, len(resources))
	for id, r := range resources {
		if res, ok := r.(map[string]any); ok && res["Type"] == "AWS::Serverless::Function" && t.Creates(id) {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)

	out := make([]Function, 0, len(ids))
	for _, id := range ids {
		res, _ := t.resource(id)
		f, err := function(id, res, &global, apis)
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, nil
}

// FunctionEnv returns the environment of the function with the given
// logical id (Globals merged in, resolved as [Function].Env describes), or
// nil when the template creates no such function.
func FunctionEnv(t *Template, logicalID string) map[string]string {
	if !t.Creates(logicalID) {
		return nil
	}
	fns, err := Functions(t)
	if err != nil {
		return nil
	}
	for _, f := range fns {
		if f.LogicalID == logicalID {
			return f.Env
		}
	}
	return nil
}

// function builds one Function from its resolved resource and Globals.
func function(id string, res map[string]any, global *samFunction, apis map[string]*httpAPIAuth) (Function, error) {
	var p samFunction
	if err := remarshal(res["Properties"], &p); err != nil {
		return Function{}, fmt.Errorf("read function %s: %w", id, err)
	}
	f := Function{
		LogicalID:     id,
		Runtime:       pick(p.Runtime, global.Runtime),
		Handler:       pick(p.Handler, global.Handler),
		Architectures: p.Architectures,
		Tracing:       pick(p.Tracing, global.Tracing),
		Timeout:       DefaultTimeout,
		MemorySize:    DefaultMemorySize,
		Env:           map[string]string{},
	}
	if f.Architectures == nil {
		f.Architectures = global.Architectures
	}
	if s, ok := p.CodeUri.(string); ok {
		f.CodeURI = s
	} else if s, ok := global.CodeUri.(string); ok && p.CodeUri == nil {
		f.CodeURI = s
	}
	if md, ok := res["Metadata"].(map[string]any); ok {
		f.BuildMethod, _ = md["BuildMethod"].(string)
	}
	if v := pickNum(p.Timeout, global.Timeout); v != nil {
		f.Timeout = time.Duration(*v * float64(time.Second))
	}
	if v := pickNum(p.MemorySize, global.MemorySize); v != nil {
		f.MemorySize = int(*v)
	}
	for _, e := range []*samFunction{global, &p} {
		if e.Environment == nil {
			continue
		}
		for k, v := range e.Environment.Variables {
			s, ok := scalarString(v)
			if !ok {
				delete(f.Env, k) // AWS::NoValue: SAM drops the variable
				continue
			}
			f.Env[k] = s
		}
	}

	names := make([]string, 0, len(p.Events))
	for name := range p.Events {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		ev := p.Events[name]
		pr := ev.Properties
		switch ev.Type {
		case "HttpApi":
			r := Route{
				Event:                name,
				Method:               strings.ToUpper(pr.Method),
				Path:                 pr.Path,
				PayloadFormatVersion: pr.PayloadFormatVersion,
				Timeout:              DefaultIntegrationTimeout,
			}
			if r.Method == "" || r.Method == "*" {
				r.Method = "ANY"
			}
			if r.PayloadFormatVersion == "" {
				r.PayloadFormatVersion = DefaultPayloadFormatVersion
			}
			if pr.TimeoutInMillis != nil {
				r.Timeout = time.Duration(*pr.TimeoutInMillis) * time.Millisecond
			}
			api := apiID(pr.ApiId)
			if _, ok := apis[api]; !ok {
				return Function{}, fmt.Errorf("function %s, event %s: ApiId %v is not an AWS::Serverless::HttpApi of the template", id, name, pr.ApiId)
			}
			var authName string
			if pr.Auth != nil {
				authName = pr.Auth.Authorizer
			}
			auth, err := routeAuth(authName, apis[api])
			if err != nil {
				return Function{}, fmt.Errorf("function %s, event %s: %w", id, name, err)
			}
			r.Auth = auth
			f.Routes = append(f.Routes, r)
		case "Schedule", "ScheduleV2":
			s := Schedule{Event: name, Expression: pr.Schedule, Enabled: true, Input: pr.Input}
			if ev.Type == "ScheduleV2" {
				s.Expression = pr.ScheduleExpression
				s.Enabled = pr.State != "DISABLED"
			}
			if pr.Enabled != nil {
				s.Enabled = *pr.Enabled
			}
			f.Schedules = append(f.Schedules, s)
		}
	}

	if err := readPolicies(p.Policies, &f); err != nil {
		return Function{}, fmt.Errorf("read policies of %s: %w", id, err)
	}
	return f, nil
}

// apiID returns the logical id an HttpApi event's ApiId refers to, "" for
// the implicit API.
func apiID(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case map[string]any:
		if ref, ok := v["Ref"].(string); ok {
			return ref
		}
	}
	return ""
}

// readPolicies sorts a function's Policies into inline statements and
// other policies.
func readPolicies(policies any, f *Function) error {
	var list []any
	switch v := policies.(type) {
	case nil:
		return nil
	case []any:
		list = v
	default:
		list = []any{v}
	}
	for _, p := range list {
		switch v := p.(type) {
		case string:
			f.ManagedPolicies = append(f.ManagedPolicies, v)
		case map[string]any:
			stmts, ok := v["Statement"]
			if !ok { // a SAM policy template: {Name: {parameters}}
				for name := range v {
					f.ManagedPolicies = append(f.ManagedPolicies, name)
				}
				continue
			}
			list, ok := stmts.([]any)
			if !ok {
				list = []any{stmts}
			}
			for _, s := range list {
				var raw struct {
					Sid      string
					Effect   string
					Action   any
					Resource any
				}
				if err := remarshal(s, &raw); err != nil {
					return err
				}
				f.Statements = append(f.Statements, Statement{
					Sid:       raw.Sid,
					Effect:    raw.Effect,
					Actions:   strings1(raw.Action),
					Resources: strings1(raw.Resource),
				})
			}
		default:
			return fmt.Errorf("unexpected policy entry %v", p)
		}
	}
	return nil
}

// remarshal converts generic JSON values into a struct.
func remarshal(v any, into any) error {
	if v == nil {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, into)
}

// strings1 reads a string-or-list-of-strings IAM element.
func strings1(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case []any:
		out := make([]string, 0, len(v))
		for _, e := range v {
			if s, ok := scalarString(e); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// scalarString formats a resolved scalar as an environment value.
func scalarString(v any) (string, bool) {
	switch v := v.(type) {
	case string:
		return v, true
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64), true
	case bool:
		return strconv.FormatBool(v), true
	}
	return "", false
}

func pick(own, global *string) string {
	if own != nil {
		return *own
	}
	if global != nil {
		return *global
	}
	return ""
}

func pickNum(own, global *float64) *float64 {
	if own != nil {
		return own
	}
	return global
}

// MakeBuildEnv returns the environment in which `sam build` runs `make
// build-<LogicalId>` for a function with BuildMethod makefile: environ
// without the flags of a make that runs the caller (MAKEFLAGS, MFLAGS,
// MAKELEVEL), since sam build starts make afresh, with ARTIFACTS_DIR set to
// artifacts. environ is not modified.
func MakeBuildEnv(environ []string, artifacts string) []string {
	env := make([]string, 0, len(environ)+1)
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		switch name {
		case "MAKEFLAGS", "MFLAGS", "MAKELEVEL", "ARTIFACTS_DIR":
			continue
		}
		env = append(env, kv)
	}
	return append(env, "ARTIFACTS_DIR="+artifacts)
}
