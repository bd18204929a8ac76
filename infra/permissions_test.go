package infra_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lambda-dedupe/dedupe/infra"
)

// permissionsTable loads the permissions table (infra.PermissionsFile).
func permissionsTable(t *testing.T) infra.PermissionTable {
	t.Helper()
	tbl, err := infra.Permissions()
	if err != nil {
		t.Fatal(err)
	}
	return tbl
}

// knownGaps are the policies the project ships that do not yet grant
// what the code calls, each with the grants it lacks: the test fails when
// a gap widens, narrows or closes, so that this list is kept exact.
var knownGaps = map[string][]string{}

// TestShippedPolicies checks every role and policy the project ships
// against the permissions table: each function of template.yaml (with a
// created table and with an existing one), of infra/dedupe.yaml, of the
// own-stack example and of the lint's good template, by the roles its
// environment gives it (infra.FunctionRoles), and the operators' managed
// policy. Each must allow exactly what its roles need on dedupe's table,
// indexes and objects: nothing missing, nothing more.
func TestShippedPolicies(t *testing.T) {
	tbl := permissionsTable(t)
	root, err := infra.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	files := []struct {
		name, path string
		params     map[string]string
	}{
		{"template.yaml", infra.TemplateFile, nil},
		{"template.yaml (existing table)", infra.TemplateFile, map[string]string{"ExistingIdempotencyTableName": existingTable}},
		{"infra/dedupe.yaml", "infra/dedupe.yaml", nil},
		{"infra/testdata/own-stack.yaml", "infra/testdata/own-stack.yaml", nil},
		{"infra/testdata/lint/good.yaml", "infra/testdata/lint/good.yaml", nil},
	}
	seen := map[string]bool{}
	for _, f := range files {
		tpl, err := infra.LoadWithOptions(filepath.Join(root, f.path), &infra.Options{Parameters: f.params})
		if err != nil {
			t.Fatal(err)
		}
		fns, err := infra.Functions(tpl)
		if err != nil {
			t.Fatal(err)
		}
		checked := 0
		for _, fn := range fns {
			roles := infra.FunctionRoles(fn)
			if roles == nil {
				continue
			}
			checked++
			table, bucket := tpl.DedupeARNs(fn)
			checkPolicy(t, tbl, f.name+" "+fn.LogicalID, fn.Statements, table, bucket, roles...)
			seen[f.name+" "+fn.LogicalID] = true
		}
		if checked == 0 {
			t.Errorf("%s: no guarded function found", f.name)
		}
		if _, ok := tpl.Resources["IdempotencyOperatorPolicy"]; !ok {
			continue
		}
		p, err := tpl.GetIAMManagedPolicyWithName("IdempotencyOperatorPolicy")
		if err != nil {
			t.Fatal(err)
		}
		table := "${IdempotencyTable.Arn}"
		if f.params != nil {
			table = "arn:aws:dynamodb:us-east-1:123456789012:table/" + existingTable
		}
		checkPolicy(t, tbl, f.name+" IdempotencyOperatorPolicy", documentStatements(t, p.PolicyDocument), table, "", "operator")
	}
	for name := range knownGaps {
		if !seen[name] && !strings.HasSuffix(name, "IdempotencyOperatorPolicy") {
			t.Errorf("known gap %q: no such policy checked", name)
		}
	}
}

// checkPolicy fails t unless stmts allow exactly what roles need, or
// lack exactly the known gap of name.
func checkPolicy(t *testing.T, tbl infra.PermissionTable, name string, stmts []infra.Statement, table, bucket string, roles ...string) {
	t.Helper()
	got, err := tbl.CheckPolicy(stmts, table, bucket, roles...)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var missing []string
	for _, g := range got.Missing {
		missing = append(missing, g.String())
	}
	if want := knownGaps[name]; !slices.Equal(missing, want) {
		t.Errorf("%s (roles %v, table %s): missing %q, want %q (the permissions table, %s)", name, roles, table, missing, want, infra.PermissionsFile)
	}
	if len(got.Extra) > 0 {
		t.Errorf("%s (roles %v): allows more than dedupe calls: %q", name, roles, got.Extra)
	}
}

// documentStatements reads the statements of a policy document.
func documentStatements(t *testing.T, doc any) []infra.Statement {
	t.Helper()
	raw, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Statement []struct {
			Sid      string
			Effect   string
			Action   json.RawMessage
			Resource json.RawMessage
		}
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("policy document: %v\n%s", err, raw)
	}
	list := func(m json.RawMessage) []string {
		var one string
		if json.Unmarshal(m, &one) == nil {
			return []string{one}
		}
		var many []string
		if err := json.Unmarshal(m, &many); err != nil {
			t.Fatalf("not a string or a list of strings: %s", m)
		}
		return many
	}
	var out []infra.Statement
	for _, s := range d.Statement {
		out = append(out, infra.Statement{Sid: s.Sid, Effect: s.Effect, Actions: list(s.Action), Resources: list(s.Resource)})
	}
	return out
}

// TestCheckPolicy checks the policy check itself on hand-made
// statements: what it finds missing and what it finds too broad.
func TestCheckPolicy(t *testing.T) {
	tbl := permissionsTable(t)
	const T = "${Tbl.Arn}"
	allow := func(res string, actions ...string) infra.Statement {
		return infra.Statement{Effect: "Allow", Actions: actions, Resources: []string{res}}
	}
	guard := []infra.Statement{allow(T, "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DescribeTable")}
	tests := []struct {
		name    string
		stmts   []infra.Statement
		roles   []string
		missing []string
		extra   []string
		bucket  string
	}{
		{name: "exact", stmts: guard, roles: []string{"guarded function"}},
		{name: "no DescribeTable", stmts: []infra.Statement{allow(T, "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem")},
			roles: []string{"guarded function"}, missing: []string{"dynamodb:DescribeTable on table"}},
		{name: "CRUD", stmts: []infra.Statement{allow(T, "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DescribeTable", "dynamodb:DeleteItem", "dynamodb:Scan"), allow(T+"/index/*", "dynamodb:Query")},
			roles: []string{"guarded function"}, extra: []string{"dynamodb:DeleteItem on " + T, "dynamodb:Query on " + T + "/index/*", "dynamodb:Scan on " + T}},
		{name: "wildcard action", stmts: []infra.Statement{allow(T, "dynamodb:*")}, roles: []string{"guarded function"}, extra: []string{"dynamodb:* on " + T}},
		{name: "wildcard resource", stmts: []infra.Statement{allow("*", "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DescribeTable")}, roles: []string{"guarded function"},
			extra: []string{"dynamodb:DescribeTable on *", "dynamodb:GetItem on *", "dynamodb:PutItem on *", "dynamodb:UpdateItem on *"}},
		{name: "deny is no grant", stmts: append([]infra.Statement{{Effect: "Deny", Actions: []string{"dynamodb:*"}, Resources: []string{"*"}}}, allow(T, "dynamodb:GetItem")),
			roles: []string{"guarded function"}, missing: []string{"dynamodb:DescribeTable on table", "dynamodb:PutItem on table", "dynamodb:UpdateItem on table"}},
		{name: "reaper on the wrong index", stmts: []infra.Statement{allow(T, "dynamodb:UpdateItem", "dynamodb:DescribeTable"), allow(T+"/index/ref", "dynamodb:Query")},
			roles: []string{"reaper"}, missing: []string{"dynamodb:Query on index/inflight"}, extra: []string{"dynamodb:Query on " + T + "/index/ref"}},
		{name: "objects outside the prefix", bucket: "${B.Arn}", stmts: append(slices.Clone(guard), allow("${B.Arn}/*", "s3:GetObject", "s3:PutObject")),
			roles: []string{"guarded function", "large responses"}, extra: []string{"s3:GetObject on ${B.Arn}/*", "s3:PutObject on ${B.Arn}/*"}},
		{name: "objects", bucket: "${B.Arn}", stmts: append(slices.Clone(guard), allow("${B.Arn}/dedupe/*", "s3:GetObject", "s3:PutObject")),
			roles: []string{"guarded function", "large responses"}},
		{name: "no objects", bucket: "${B.Arn}", stmts: guard, roles: []string{"guarded function", "large responses"},
			missing: []string{"s3:GetObject on bucket/dedupe/*", "s3:PutObject on bucket/dedupe/*"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tbl.CheckPolicy(tt.stmts, T, tt.bucket, tt.roles...)
			if err != nil {
				t.Fatal(err)
			}
			var missing []string
			for _, g := range got.Missing {
				missing = append(missing, g.String())
			}
			if !slices.Equal(missing, tt.missing) || !slices.Equal(got.Extra, tt.extra) {
				t.Errorf("got missing %q, extra %q; want %q, %q", missing, got.Extra, tt.missing, tt.extra)
			}
		})
	}
}

// TestPermissionsDoc: docs/deploying.md shows the permissions table as
// Markdown() renders it, between its markers.
func TestPermissionsDoc(t *testing.T) {
	tbl := permissionsTable(t)
	want, err := tbl.Markdown()
	if err != nil {
		t.Fatal(err)
	}
	root, err := infra.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	const doc = "docs/deploying.md"
	b, err := os.ReadFile(filepath.Join(root, doc))
	if err != nil {
		t.Fatal(err)
	}
	const begin, end = "<!-- permissions: generated from " + infra.PermissionsFile + " by TestPermissionsDoc -->\n", "<!-- end of permissions -->"
	_, rest, ok := strings.Cut(string(b), begin)
	got, _, ok2 := strings.Cut(rest, end)
	if !ok || !ok2 {
		t.Fatalf("%s has no %q ... %q section", doc, strings.TrimSpace(begin), end)
	}
	if got != want {
		t.Errorf("%s's permissions table is out of date; replace it with:\n%s", doc, want)
	}
}
