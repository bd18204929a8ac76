package infra

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strings"
)

// PermissionsFile is the path, relative to the module root, of the
// permissions table: what each part of dedupe calls, as IAM actions on the
// idempotency table, its indexes and the large-response bucket. It is
// written from recordings of the calls the code really makes (the test
// TestPermissions in infra/internal/permtest, which fails when code and
// table differ), and read by [Permissions] and by the cfn-lint rules
// (RulesDir), so that the docs, the shipped policies and the lint have
// one source.
const PermissionsFile = "infra/cfnlint/permissions.json"

//go:embed cfnlint/permissions.json
var permissionsJSON []byte

// Resources a Grant names, relative to the idempotency table (On "table",
// "index/<name>") or to the large-response bucket (OnObjects...).
const (
	// OnTable is the idempotency table itself.
	OnTable = "table"
	// OnIndexPrefix starts the resource of an index: "index/inflight".
	OnIndexPrefix = "index/"
	// OnObjectsPrefix starts the resource of the large-response objects,
	// followed by the object name prefix and "*": "bucket/dedupe/*".
	OnObjectsPrefix = "bucket/"
)

// Grant is one IAM action on one resource (see OnTable). Its JSON form
// is one string, "dynamodb:GetItem on table".
type Grant struct {
	Action string
	On     string
}

// String returns the grant as its JSON form writes it.
func (g Grant) String() string { return g.Action + " on " + g.On }

// MarshalText implements encoding.TextMarshaler.
func (g Grant) MarshalText() ([]byte, error) { return []byte(g.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (g *Grant) UnmarshalText(b []byte) error {
	a, on, ok := strings.Cut(string(b), " on ")
	if !ok || a == "" || on == "" {
		return fmt.Errorf("permissions: grant %q is not \"<action> on <resource>\"", b)
	}
	g.Action, g.On = a, on
	return nil
}

// Part is one piece of dedupe and the grants it needs: what the code
// calls, recorded.
type Part struct {
	// Name names the part, e.g. "guard" or "operator-show".
	Name string `json:"name"`
	// What says what the part is and what was recorded.
	What string `json:"what"`
	// Rule is the cfn-lint rule that reports a role without these grants
	// ("" for the operator's parts: a managed policy for people, which no
	// rule can tie to a function).
	Rule string `json:"rule,omitempty"`
	// Grants are the recorded grants, sorted.
	Grants []Grant `json:"grants"`
}

// Role is a kind of role or policy that a deployment gives dedupe, and
// the parts it needs.
type Role struct {
	// Name names it, e.g. "guarded function".
	Name string `json:"name"`
	// Env is the environment variable that makes a function this role
	// (as the lint reads templates), "" for the operator.
	Env string `json:"env,omitempty"`
	// Parts are the names of the parts it needs.
	Parts []string `json:"parts"`
}

// PermissionTable is the content of PermissionsFile.
type PermissionTable struct {
	About string `json:"about"`
	Parts []Part `json:"parts"`
	Roles []Role `json:"roles"`
}

// The roles. A function whose environment sets IDEMPOTENCY_TABLE is
// guarded; with REAPER_SHARDS it is a reaper instead; LARGE_RESPONSE_BUCKET
// (the demo's variable for dynamostore.Options.LargeResults) adds the
// large-response objects. DescribeTable is its own part (dynamostore.New's
// global-table check): a store built with GlobalTablesUnchecked does not
// need it.
var Roles = []Role{
	{Name: "guarded function", Env: "IDEMPOTENCY_TABLE", Parts: []string{"guard", "global-table-check"}},
	{Name: "reaper", Env: "REAPER_SHARDS", Parts: []string{"reaper", "global-table-check"}},
	{Name: "large responses", Env: "LARGE_RESPONSE_BUCKET", Parts: []string{"large-results"}},
	{Name: "operator", Parts: []string{"operator-key", "operator-show", "operator-inflight", "operator-stranded", "operator-release", "operator-forget"}},
}

// Permissions returns the permissions table (PermissionsFile) as it was
// built into this package.
func Permissions() (PermissionTable, error) {
	var t PermissionTable
	if err := json.Unmarshal(permissionsJSON, &t); err != nil {
		return t, fmt.Errorf("read %s: %w", PermissionsFile, err)
	}
	return t, nil
}

// Part returns the named part, and whether the table has it.
func (t PermissionTable) Part(name string) (Part, bool) {
	i := slices.IndexFunc(t.Parts, func(p Part) bool { return p.Name == name })
	if i < 0 {
		return Part{}, false
	}
	return t.Parts[i], true
}

// Role returns the named role, and whether the table has it.
func (t PermissionTable) Role(name string) (Role, bool) {
	i := slices.IndexFunc(t.Roles, func(r Role) bool { return r.Name == name })
	if i < 0 {
		return Role{}, false
	}
	return t.Roles[i], true
}

// Grants returns the union of the grants of the named roles (their parts),
// sorted. An unknown role or part is an error.
func (t PermissionTable) Grants(roles ...string) ([]Grant, error) {
	var out []Grant
	for _, rn := range roles {
		r, ok := t.Role(rn)
		if !ok {
			return nil, fmt.Errorf("permissions: no role %q", rn)
		}
		for _, pn := range r.Parts {
			p, ok := t.Part(pn)
			if !ok {
				return nil, fmt.Errorf("permissions: role %q needs part %q, which the table does not have", rn, pn)
			}
			out = append(out, p.Grants...)
		}
	}
	SortGrants(&out)
	return out, nil
}

// SortGrants sorts grants by resource, then action, and drops duplicates.
func SortGrants(g *[]Grant) {
	slices.SortFunc(*g, func(a, b Grant) int {
		if c := strings.Compare(a.On, b.On); c != 0 {
			return c
		}
		return strings.Compare(a.Action, b.Action)
	})
	*g = slices.Compact(*g)
}

// PolicyCheck is what CheckPolicy found: the grants needed but not
// allowed, and what the statements allow on dedupe's resources beyond
// what is needed. Both are empty when the policy grants exactly what the
// roles need.
type PolicyCheck struct {
	Missing []Grant
	// Extra are "action on resource" of the statements, as written.
	Extra []string
}

// CheckPolicy checks the Allow statements stmts (Effect Allow, Actions and
// Resources as Load resolves them: "${IdempotencyTable.Arn}" for a
// created table) against what roles need (see Grants): table is the
// idempotency table's ARN as the statements spell it, bucket the
// large-response bucket's (may be empty when no role needs it). A grant is
// allowed when some statement's action and resource patterns (IAM
// wildcards * and ?) match it; an allowed action on a resource that
// matches dedupe's table, an index of it or the bucket's objects but that
// no role needs there is Extra.
func (t PermissionTable) CheckPolicy(stmts []Statement, table, bucket string, roles ...string) (PolicyCheck, error) {
	need, err := t.Grants(roles...)
	if err != nil {
		return PolicyCheck{}, err
	}
	var out PolicyCheck
	for _, g := range need {
		arn, err := grantARN(g, table, bucket)
		if err != nil {
			return PolicyCheck{}, err
		}
		if !allows(stmts, g.Action, arn) {
			out.Missing = append(out.Missing, g)
		}
	}
	// Every concrete resource of dedupe's the policy could name.
	resources := map[string]string{} // ARN -> On
	resources[table] = OnTable
	for _, idx := range []string{"inflight", "ref", "other"} {
		resources[table+"/index/"+idx] = OnIndexPrefix + idx
	}
	if bucket != "" {
		for _, g := range need {
			if strings.HasPrefix(g.On, OnObjectsPrefix) {
				arn, _ := grantARN(g, table, bucket)
				resources[arn] = g.On
			}
		}
		resources[bucket+"/elsewhere/object"] = OnObjectsPrefix + "elsewhere/*"
		resources[bucket] = "bucket"
	}
	needed := map[Grant]bool{}
	for _, g := range need {
		needed[g] = true
	}
	for _, s := range stmts {
		if s.Effect != "Allow" {
			continue
		}
		for _, res := range s.Resources {
			for _, act := range s.Actions {
				for arn, on := range resources {
					if !match(res, arn) {
						continue
					}
					if extra := extraActions(act, on, needed); len(extra) > 0 {
						out.Extra = append(out.Extra, act+" on "+res)
						break
					}
				}
			}
		}
	}
	slices.Sort(out.Extra)
	out.Extra = slices.Compact(out.Extra)
	return out, nil
}

// extraActions reports whether the action pattern act allows, on the
// resource kind on, an action that is not needed there: a literal action
// that is not needed, or a wildcard (which allows more than any need).
func extraActions(act, on string, needed map[Grant]bool) []string {
	if strings.ContainsAny(act, "*?") {
		return []string{act}
	}
	for g := range needed {
		if strings.EqualFold(g.Action, act) && g.On == on {
			return nil
		}
	}
	return []string{act}
}

// grantARN returns the ARN a grant names, given the table's and the
// bucket's.
func grantARN(g Grant, table, bucket string) (string, error) {
	switch {
	case g.On == OnTable:
		return table, nil
	case strings.HasPrefix(g.On, OnIndexPrefix):
		return table + "/" + g.On, nil
	case strings.HasPrefix(g.On, OnObjectsPrefix):
		if bucket == "" {
			return "", fmt.Errorf("permissions: %s on %s needs the bucket's ARN", g.Action, g.On)
		}
		// An object under the prefix: what the pattern's * stands for.
		return bucket + "/" + strings.TrimSuffix(strings.TrimPrefix(g.On, OnObjectsPrefix), "*") + "0f/1e", nil
	}
	return "", fmt.Errorf("permissions: grant %s on unknown resource %q", g.Action, g.On)
}

// allows reports whether an Allow statement of stmts allows action on arn.
func allows(stmts []Statement, action, arn string) bool {
	for _, s := range stmts {
		if s.Effect != "Allow" {
			continue
		}
		if slices.ContainsFunc(s.Actions, func(a string) bool { return match(strings.ToLower(a), strings.ToLower(action)) }) &&
			slices.ContainsFunc(s.Resources, func(r string) bool { return match(r, arn) }) {
			return true
		}
	}
	return false
}

// match matches an IAM pattern (* any run of characters, ? any one
// character, across "/" too) against s.
func match(pattern, s string) bool {
	// path.Match's * stops at "/", IAM's does not: match with "/" hidden.
	const slash = "\x00"
	ok, err := path.Match(strings.ReplaceAll(pattern, "/", slash), strings.ReplaceAll(s, "/", slash))
	return err == nil && ok
}

// Markdown renders the roles as the Markdown table docs/deploying.md
// shows (between its permissions markers), one row per role and resource.
func (t PermissionTable) Markdown() (string, error) {
	var b strings.Builder
	b.WriteString("| role | resource | actions | checked by |\n|---|---|---|---|\n")
	for _, r := range t.Roles {
		type row struct {
			on      string
			actions []string
			rules   []string
		}
		var rows []row
		for _, pn := range r.Parts {
			p, ok := t.Part(pn)
			if !ok {
				return "", fmt.Errorf("permissions: role %q needs part %q, which the table does not have", r.Name, pn)
			}
			for _, g := range p.Grants {
				i := slices.IndexFunc(rows, func(x row) bool { return x.on == g.On })
				if i < 0 {
					rows = append(rows, row{on: g.On})
					i = len(rows) - 1
				}
				rows[i].actions = append(rows[i].actions, g.Action)
				if p.Rule != "" {
					rows[i].rules = append(rows[i].rules, p.Rule)
				}
			}
		}
		slices.SortFunc(rows, func(a, b row) int { return strings.Compare(a.on, b.on) })
		who := r.Name
		if r.Env != "" {
			who += " (`" + r.Env + "`)"
		}
		for _, x := range rows {
			slices.Sort(x.actions)
			slices.Sort(x.rules)
			acts := make([]string, 0, len(x.actions))
			for _, a := range slices.Compact(x.actions) {
				acts = append(acts, "`"+a+"`")
			}
			rules := strings.Join(slices.Compact(x.rules), ", ")
			if rules == "" {
				rules = "no lint rule (a policy for people)"
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", who, resourceName(x.on), strings.Join(acts, ", "), rules)
		}
	}
	return b.String(), nil
}

// resourceName says in words which resource a Grant's On names.
func resourceName(on string) string {
	switch {
	case on == OnTable:
		return "the table"
	case strings.HasPrefix(on, OnIndexPrefix):
		return "`" + on + "`"
	case strings.HasPrefix(on, OnObjectsPrefix):
		return "objects `" + strings.TrimPrefix(on, OnObjectsPrefix) + "` of the bucket"
	}
	return on
}

// FunctionRoles returns the roles (of Roles) that the function f plays, as
// its environment says: none without IDEMPOTENCY_TABLE; "reaper" with
// REAPER_SHARDS, else "guarded function"; and "large responses" with
// LARGE_RESPONSE_BUCKET. The cfn-lint rules read templates the same way.
func FunctionRoles(f Function) []string {
	if f.Env["IDEMPOTENCY_TABLE"] == "" {
		return nil
	}
	roles := []string{"guarded function"}
	if f.Env["REAPER_SHARDS"] != "" {
		roles = []string{"reaper"}
	}
	if f.Env["LARGE_RESPONSE_BUCKET"] != "" {
		roles = append(roles, "large responses")
	}
	return roles
}

// DedupeARNs returns the ARNs of the idempotency table and of the
// large-response bucket that f's environment names (IDEMPOTENCY_TABLE,
// LARGE_RESPONSE_BUCKET), as the template's statements spell them once
// Load has resolved them: "${IdempotencyTable.Arn}" for a table of the
// template, the table ARN in us-east-1 and account 123456789012 for a
// name, "${Dedupe.Outputs.IdempotencyTableArn}" for the output
// IdempotencyTableName of a nested stack (infra/dedupe.yaml). bucket is
// "" when f names none.
func (t *Template) DedupeARNs(f Function) (table, bucket string) {
	name := f.Env["IDEMPOTENCY_TABLE"]
	switch {
	case strings.HasPrefix(name, "${") && strings.HasSuffix(name, ".Outputs.IdempotencyTableName}"):
		table = strings.TrimSuffix(name, "Name}") + "Arn}"
	case t.Resources[name].Type == typeTable:
		table = "${" + name + ".Arn}"
	default:
		for id, r := range t.Resources {
			if r.Type == typeTable && t.physicalName(id) == name {
				table = "${" + id + ".Arn}"
			}
		}
		if table == "" {
			table = "arn:" + pseudoPartition + ":dynamodb:" + pseudoRegion + ":" + pseudoAccountID + ":table/" + name
		}
	}
	if b := f.Env["LARGE_RESPONSE_BUCKET"]; b != "" {
		if t.Resources[b].Type == "AWS::S3::Bucket" {
			bucket = "${" + b + ".Arn}"
		} else {
			bucket = "arn:" + pseudoPartition + ":s3:::" + b
		}
	}
	return table, bucket
}
