package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestApply: a mutant replaces exactly the token at its position by the
// one gremlins' mutator maps it to, and a position whose token the
// mutator does not change (the source moved since the report) is refused,
// never mutated elsewhere.
func TestApply(t *testing.T) {
	const src = "package p\n\nfunc f(a, b int) bool {\n\tc := a + b - a*b/2%3\n\tc++\n\tc--\n\tfor c > 0 { break }\n\treturn a < b && a >= -b || c == 0 && a != b && a <= c\n}\n"
	tests := []struct {
		line, col int
		typ, want string // want: the changed line, "" for refused
	}{
		{4, 9, "ARITHMETIC_BASE", "\tc := a - b - a*b/2%3"},
		{4, 13, "ARITHMETIC_BASE", "\tc := a + b + a*b/2%3"},
		{4, 16, "ARITHMETIC_BASE", "\tc := a + b - a/b/2%3"},
		{4, 18, "ARITHMETIC_BASE", "\tc := a + b - a*b*2%3"},
		{4, 20, "ARITHMETIC_BASE", "\tc := a + b - a*b/2*3"},
		{5, 3, "INCREMENT_DECREMENT", "\tc--"},
		{6, 3, "INCREMENT_DECREMENT", "\tc++"},
		{7, 8, "CONDITIONALS_BOUNDARY", "\tfor c >= 0 { break }"},
		{7, 8, "CONDITIONALS_NEGATION", "\tfor c <= 0 { break }"},
		{7, 14, "INVERT_LOOPCTRL", "\tfor c > 0 { continue }"},
		{8, 11, "CONDITIONALS_BOUNDARY", "\treturn a <= b && a >= -b || c == 0 && a != b && a <= c"},
		{8, 11, "CONDITIONALS_NEGATION", "\treturn a >= b && a >= -b || c == 0 && a != b && a <= c"},
		{8, 15, "INVERT_LOGICAL", "\treturn a < b || a >= -b || c == 0 && a != b && a <= c"},
		{8, 20, "CONDITIONALS_BOUNDARY", "\treturn a < b && a > -b || c == 0 && a != b && a <= c"},
		{8, 20, "CONDITIONALS_NEGATION", "\treturn a < b && a < -b || c == 0 && a != b && a <= c"},
		{8, 23, "INVERT_NEGATIVES", "\treturn a < b && a >= +b || c == 0 && a != b && a <= c"},
		{8, 26, "INVERT_LOGICAL", "\treturn a < b && a >= -b && c == 0 && a != b && a <= c"},
		{8, 31, "CONDITIONALS_NEGATION", "\treturn a < b && a >= -b || c != 0 && a != b && a <= c"},
		{8, 41, "CONDITIONALS_NEGATION", "\treturn a < b && a >= -b || c == 0 && a == b && a <= c"},
		{8, 51, "CONDITIONALS_BOUNDARY", "\treturn a < b && a >= -b || c == 0 && a != b && a < c"},
		{8, 51, "CONDITIONALS_NEGATION", "\treturn a < b && a >= -b || c == 0 && a != b && a > c"},
		// Moved: no token starts there, or one the mutator leaves alone.
		{4, 10, "ARITHMETIC_BASE", ""},
		{4, 8, "ARITHMETIC_BASE", ""}, // the space before a +
		{4, 9, "CONDITIONALS_NEGATION", ""},
		{8, 31, "CONDITIONALS_BOUNDARY", ""},
		{99, 1, "ARITHMETIC_BASE", ""},
	}
	for _, tt := range tests {
		got, err := apply([]byte(src), tt.line, tt.col, tt.typ)
		if tt.want == "" {
			if err == nil {
				t.Errorf("%d:%d %s: applied, want refused:\n%s", tt.line, tt.col, tt.typ, got)
			}
			continue
		}
		if err != nil {
			t.Errorf("%d:%d %s: %v", tt.line, tt.col, tt.typ, err)
			continue
		}
		lines := strings.Split(src, "\n")
		lines[tt.line-1] = tt.want
		if want := strings.Join(lines, "\n"); string(got) != want {
			t.Errorf("%d:%d %s: got\n%s\nwant\n%s", tt.line, tt.col, tt.typ, got, want)
		}
	}
	if _, err := apply([]byte(src), 4, 9, "REMOVE_SELF_ASSIGNMENTS"); err == nil || !strings.Contains(err.Error(), "REMOVE_SELF_ASSIGNMENTS") {
		t.Errorf("a mutator -recheck does not know: %v, want refused naming it", err)
	}
}

// TestRecheck: a recheck tests again, by hand, the LIVED and NOT COVERED
// mutants of a report on the fixture package testdata/tiny: a mutant a
// test fails on is KILLED, one the tests run and pass stays LIVED, one no
// test reaches stays NOT COVERED, the other statuses are kept, and one
// whose position no longer holds its token is MOVED, never counted, and
// makes the recheck fail (exit 1) after writing its report.
func TestRecheck(t *testing.T) {
	out := t.TempDir()
	report := filepath.Join(out, "before.json")
	before := `{"files": [{"file_name": "tiny.go", "mutations": [
		{"type": "CONDITIONALS_NEGATION", "status": "LIVED", "line": 10, "column": 7},
		{"type": "CONDITIONALS_BOUNDARY", "status": "LIVED", "line": 10, "column": 7},
		{"type": "CONDITIONALS_BOUNDARY", "status": "NOT COVERED", "line": 17, "column": 38},
		{"type": "CONDITIONALS_NEGATION", "status": "TIMED OUT", "line": 17, "column": 38},
		{"type": "ARITHMETIC_BASE", "status": "LIVED", "line": 11, "column": 3}]}]}`
	if err := os.WriteFile(report, []byte(before), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := run([]string{"-recheck", report, "-out", out, "-equivalent", "localtest/cmd/mutate/testdata/equivalent.md", "-timeout-coefficient", "30", "./testdata/tiny"}, &stdout, &stderr)
	if code != 1 {
		t.Errorf("exit code %d, want 1 (a mutant moved)\n%s", code, stderr.String())
	}
	for _, want := range []string{
		"recheck of " + report + ": its 4 LIVED and NOT COVERED mutants tested again by hand",
		"./testdata/tiny: killed 1, lived 1 (1 listed as equivalent), not covered 1, timed out 1, not viable 0; " +
			"efficacy 50.0% (100.0% without the listed), mutator coverage 66.7%",
		"lived, equivalent  localtest/cmd/mutate/testdata/tiny/tiny.go:10:7 CONDITIONALS_BOUNDARY",
		"not covered        localtest/cmd/mutate/testdata/tiny/tiny.go:17:38 CONDITIONALS_BOUNDARY",
		"MOVED              localtest/cmd/mutate/testdata/tiny/tiny.go:11:3 ARITHMETIC_BASE",
	} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("summary has no %q:\n%s", want, stdout.String())
		}
	}
	if !strings.Contains(stderr.String(), "recheck incomplete: 1 mutants") {
		t.Errorf("stderr does not say the recheck is incomplete:\n%s", stderr.String())
	}
	ms, err := readReport(filepath.Join(out, "localtest-cmd-mutate-testdata-tiny.recheck.json"), "localtest/cmd/mutate/testdata/tiny")
	if err != nil {
		t.Fatal(err)
	}
	got := make(map[string]string)
	for _, m := range ms {
		got[m.id()] = m.Status
	}
	const f = "localtest/cmd/mutate/testdata/tiny/tiny.go"
	for id, want := range map[string]string{
		f + ":10:7 CONDITIONALS_NEGATION":  "KILLED",
		f + ":10:7 CONDITIONALS_BOUNDARY":  "LIVED",
		f + ":17:38 CONDITIONALS_BOUNDARY": "NOT COVERED",
		f + ":17:38 CONDITIONALS_NEGATION": "TIMED OUT",
		f + ":11:3 ARITHMETIC_BASE":        moved,
	} {
		if got[id] != want {
			t.Errorf("%s: %q, want %q", id, got[id], want)
		}
	}
	var counts struct {
		Killed int `json:"mutants_killed"`
		Moved  int `json:"mutants_moved"`
	}
	b, _ := os.ReadFile(filepath.Join(out, "localtest-cmd-mutate-testdata-tiny.recheck.json"))
	if err := json.Unmarshal(b, &counts); err != nil || counts.Killed != 1 || counts.Moved != 1 {
		t.Errorf("report counts %+v, %v; want 1 killed, 1 moved", counts, err)
	}
}

// TestRecheckRefusesARedSuite: a recheck whose unmutated tests fail stops
// before any mutant (each would count as killed), naming the cause.
func TestRecheckRefusesARedSuite(t *testing.T) {
	mod := t.TempDir()
	for name, body := range map[string]string{
		"go.mod":        "module example.com/red\n\ngo 1.22\n",
		"p/p.go":        "package p\n\nfunc Max(a, b int) int {\n\tif a > b {\n\t\treturn a\n\t}\n\treturn b\n}\n",
		"p/p_test.go":   "package p\n\nimport \"testing\"\n\nfunc TestMax(t *testing.T) { t.Fatal(\"red\") }\n",
		"before.json":   `{"files": [{"file_name": "p.go", "mutations": [{"type": "CONDITIONALS_NEGATION", "status": "LIVED", "line": 4, "column": 7}]}]}`,
		"equivalent.md": "",
	} {
		path := filepath.Join(mod, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var stdout, stderr bytes.Buffer
	code := run([]string{"-recheck", filepath.Join(mod, "before.json"), "-out", filepath.Join(mod, "out"), "-equivalent", "equivalent.md", filepath.Join(mod, "p")}, &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "the unmutated tests of") || stdout.Len() != 0 {
		t.Errorf("exit %d, stdout %q, stderr %q; want 1 and the unmutated tests named", code, stdout.String(), stderr.String())
	}
}

// TestRecheckFiles: -files narrows a recheck to the mutants of the files
// it names, and a name that is not one of the package's files is refused
// before anything runs.
func TestRecheckFiles(t *testing.T) {
	out := t.TempDir()
	report := filepath.Join(out, "before.json")
	before := `{"files": [{"file_name": "tiny.go", "mutations": [{"type": "CONDITIONALS_NEGATION", "status": "LIVED", "line": 10, "column": 7}]},
		{"file_name": "gone.go", "mutations": [{"type": "CONDITIONALS_NEGATION", "status": "LIVED", "line": 1, "column": 1}]}]}`
	if err := os.WriteFile(report, []byte(before), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"-recheck", report, "-out", out, "-files", "tiny.go", "./testdata/tiny"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d, want 0 (gone.go's mutant left out)\n%s", code, stderr.String())
	}
	if want := "killed 1, lived 0"; !strings.Contains(stdout.String(), want) || strings.Contains(stdout.String(), "gone.go") {
		t.Errorf("summary, want %q and nothing of gone.go:\n%s", want, stdout.String())
	}
	stdout.Reset()
	stderr.Reset()
	if code := run([]string{"-recheck", report, "-out", out, "-files", "gone.go", "./testdata/tiny"}, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "gone.go") {
		t.Errorf("exit %d, stderr %q; want 1 naming gone.go", code, stderr.String())
	}
}
