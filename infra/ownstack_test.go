package infra_test

import (
	"errors"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/lambda-dedupe/dedupe/infra"
)

// TestNestedApplicationMatchesTemplate: infra/dedupe.yaml, the nested
// application a user adds to their own stack, creates the same
// idempotency table, reaper, schedule and grants as template.yaml.
func TestNestedApplicationMatchesTemplate(t *testing.T) {
	root, err := infra.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	main, err := infra.Load(filepath.Join(root, infra.TemplateFile))
	if err != nil {
		t.Fatal(err)
	}
	nested, err := infra.Load(filepath.Join(root, "infra", "dedupe.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	table := func(tpl *infra.Template) infra.Table {
		t.Helper()
		tables, err := infra.Tables(tpl)
		if err != nil {
			t.Fatal(err)
		}
		for _, tb := range tables {
			if tb.LogicalID == "IdempotencyTable" {
				tb.Input.TableName = nil
				return tb
			}
		}
		t.Fatal("no IdempotencyTable")
		return infra.Table{}
	}
	if got, want := table(nested), table(main); !reflect.DeepEqual(got, want) {
		t.Errorf("nested IdempotencyTable = %+v, want template.yaml's %+v", got, want)
	}
	reaper := func(tpl *infra.Template) infra.Function {
		t.Helper()
		fns, err := infra.Functions(tpl)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fns {
			if f.LogicalID == "ReaperFunction" {
				return f
			}
		}
		t.Fatal("no ReaperFunction")
		return infra.Function{}
	}
	got, want := reaper(nested), reaper(main)
	for _, k := range []string{"REAPER_SHARDS", "REAPER_GRACE", "REAPER_WARN_AGE", "IDEMPOTENCY_TABLE"} {
		if got.Env[k] != want.Env[k] {
			t.Errorf("reaper env %s = %q, want %q", k, got.Env[k], want.Env[k])
		}
	}
	if !reflect.DeepEqual(got.Schedules, want.Schedules) {
		t.Errorf("reaper schedules = %+v, want %+v", got.Schedules, want.Schedules)
	}
	actions := func(f infra.Function) map[string]bool {
		m := map[string]bool{}
		for _, s := range f.Statements {
			for _, a := range s.Actions {
				m[s.Sid+" "+a] = true
			}
		}
		return m
	}
	if !maps.Equal(actions(got), actions(want)) {
		t.Errorf("reaper grants = %v, want %v", actions(got), actions(want))
	}
	for _, f := range []infra.Function{got} {
		if f.Timeout != want.Timeout || f.Runtime != want.Runtime || f.BuildMethod != want.BuildMethod || !reflect.DeepEqual(f.Architectures, want.Architectures) {
			t.Errorf("reaper = %s %v %s %v, want %s %v %s %v", f.Runtime, f.Timeout, f.BuildMethod, f.Architectures, want.Runtime, want.Timeout, want.BuildMethod, want.Architectures)
		}
	}
}

// TestOwnStackValidates: the nested application and a user's template
// that uses it (infra/testdata/own-stack.yaml, the one docs/deploying.md
// shows) pass make validate: the offline SAM transform and cfn-lint with
// the library's rules.
func TestOwnStackValidates(t *testing.T) {
	t.Parallel() // each starts Python: let two overlap
	root, err := infra.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"infra/dedupe.yaml", "infra/testdata/own-stack.yaml"} {
		t.Run(filepath.Base(p), func(t *testing.T) {
			t.Parallel()
			_, err := infra.Validate(t.Context(), filepath.Join(root, p), "")
			needTools(t, err)
			if err != nil {
				t.Error(err)
			}
		})
	}
}

// TestLintRules: the library's cfn-lint rules flag each bad template in
// infra/testdata/lint with its rule, exactly once, at the line of the
// resource to fix and with the fix in the message, and pass the good ones
// (a waiver included).
func TestLintRules(t *testing.T) {
	t.Parallel() // each starts Python: let two overlap
	root, err := infra.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "infra", "testdata", "lint")
	// Each bad template: its one finding's rule, and the resource whose
	// line it points at.
	bad := map[string]struct{ rule, resource string }{
		"ttl-missing.yaml":    {"E9101", "Table"},
		"guard-grants.yaml":   {"E9102", "Fn"},
		"reaper-grants.yaml":  {"E9102", "Fn"},
		"public-url.yaml":     {"E9103", "Fn"},
		"describe-table.yaml": {"E9104", "Fn"},
		"ref-index.yaml":      {"W9105", "Table"},
		"large-grants.yaml":   {"E9106", "Fn"},
		"crud-policy.yaml":    {"W9107", "Fn"},
		"batch-failures.yaml": {"E9108", "Fn"},
		"reaper-index.yaml":   {"E9109", "Table"},
		"reaper-longkey.yaml": {"E9109", "Table"},
	}
	good := []string{"good.yaml", "describe-table-waived.yaml"}
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != len(bad)+len(good) {
		t.Errorf("%d templates in %s, want the %d this test knows", len(files), dir, len(bad)+len(good))
	}
	// One cfn-lint run for all: it is slow to start.
	err = infra.Lint(t.Context(), root, files...)
	needTools(t, err)
	var le *infra.LintError
	if !errors.As(err, &le) || !errors.Is(err, infra.ErrLint) {
		t.Fatalf("got %v, want lint findings", err)
	}
	found := map[string][]infra.Finding{}
	for _, f := range le.Findings {
		found[filepath.Base(f.File)] = append(found[filepath.Base(f.File)], f)
	}
	for name, want := range bad {
		fs := found[name]
		if len(fs) != 1 || fs[0].Rule != want.rule {
			t.Errorf("%s: got findings %v, want exactly one %s", name, fs, want.rule)
			continue
		}
		if from, to := resourceLines(t, filepath.Join(dir, name), want.resource); fs[0].Line < from || fs[0].Line >= to {
			t.Errorf("%s: %s at line %d, want one of resource %s's, %d to %d", name, want.rule, fs[0].Line, want.resource, from, to-1)
		}
		if !strings.Contains(fs[0].Message, "fix: ") && !strings.Contains(fs[0].Message, "; fix") {
			t.Errorf("%s: %s names no fix: %s", name, want.rule, fs[0].Message)
		}
	}
	for _, name := range good {
		if len(found[name]) != 0 {
			t.Errorf("%s: got findings %v, want none", name, found[name])
		}
	}
}

// resourceLines returns the lines of resource id in the template at
// path: from its own line to the next resource's (excluded).
func resourceLines(t *testing.T, path, id string) (from, to int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	for i, line := range lines {
		switch {
		case line == "  "+id+":":
			from = i + 1
		case from > 0 && strings.HasPrefix(line, "  ") && !strings.HasPrefix(line, "   ") && strings.HasSuffix(line, ":"):
			return from, i + 1
		}
	}
	if from == 0 {
		t.Fatalf("%s has no resource %s", path, id)
	}
	return from, len(lines) + 1
}
