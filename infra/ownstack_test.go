package infra_test

import (
	"errors"
	"maps"
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
// infra/testdata/lint with its rule, and pass the good one.
func TestLintRules(t *testing.T) {
	t.Parallel() // each starts Python: let two overlap
	root, err := infra.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "infra", "testdata", "lint")
	bad := map[string]string{
		"ttl-missing.yaml":   "E9101",
		"guard-grants.yaml":  "E9102",
		"reaper-grants.yaml": "E9102",
		"public-url.yaml":    "E9103",
	}
	paths := []string{filepath.Join(dir, "good.yaml")}
	for name := range bad {
		paths = append(paths, filepath.Join(dir, name))
	}
	// One cfn-lint run for all: it is slow to start.
	err = infra.Lint(t.Context(), root, paths...)
	needTools(t, err)
	if !errors.Is(err, infra.ErrLint) {
		t.Fatalf("got %v, want lint findings", err)
	}
	report := err.Error()
	// Each finding is "ID message\npath:line:col".
	found := map[string][]string{}
	lines := strings.Split(report, "\n")
	for i := 0; i+1 < len(lines); i++ {
		id, _, _ := strings.Cut(lines[i], " ")
		if file := filepath.Base(strings.SplitN(lines[i+1], ":", 2)[0]); strings.HasSuffix(file, ".yaml") {
			found[file] = append(found[file], id)
		}
	}
	for name, rule := range bad {
		if len(found[name]) != 1 || found[name][0] != rule {
			t.Errorf("%s: got findings %v, want exactly %s", name, found[name], rule)
		}
	}
	if len(found["good.yaml"]) != 0 {
		t.Errorf("good.yaml: got findings %v, want none", found["good.yaml"])
	}
}
