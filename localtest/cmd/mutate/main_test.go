package main

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestMakeMutate runs the real `make mutate` on the fixture package
// testdata/tiny, whose four mutants have known fates, so that a target or
// a gremlins that no longer builds or runs, or a summary that counts
// wrong, fails `make test` (a real package takes minutes to hours). It
// runs under the servers of `make test` when they are set, else on
// servers the target starts.
func TestMakeMutate(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skipf("make not found: %v", err)
	}
	root, err := moduleRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	cmd := exec.Command("make", "-C", root, "mutate", "PKG=./localtest/cmd/mutate/testdata/tiny",
		// The fixture cannot hang: a generous timeout keeps a busy
		// machine from timing a mutant out.
		"MUTATE_ARGS=-out "+out+" -equivalent localtest/cmd/mutate/testdata/equivalent.md -timeout-coefficient 30")
	// A make of its own, not the sub-make of make test.
	for _, kv := range os.Environ() {
		switch name, _, _ := strings.Cut(kv, "="); name {
		case "MAKEFLAGS", "MFLAGS", "MAKELEVEL":
		default:
			cmd.Env = append(cmd.Env, kv)
		}
	}
	got, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make mutate: %v\n%s", err, got)
	}
	for _, want := range []string{
		"./localtest/cmd/mutate/testdata/tiny: killed 1, lived 1 (1 listed as equivalent), not covered 2, timed out 0, not viable 0; " +
			"efficacy 50.0% (100.0% without the listed), mutator coverage 50.0%",
		"lived, equivalent  localtest/cmd/mutate/testdata/tiny/tiny.go:10:7 CONDITIONALS_BOUNDARY: a >= b",
		"stale entry?       localtest/cmd/mutate/testdata/tiny/tiny.go:99:1 CONDITIONALS_NEGATION: listed as equivalent, no such mutant in this run",
		"not covered        localtest/cmd/mutate/testdata/tiny/tiny.go:17:38 CONDITIONALS_NEGATION",
	} {
		if !strings.Contains(string(got), want) {
			t.Errorf("make mutate's output has no %q:\n%s", want, got)
		}
	}
	for _, ext := range []string{".txt", ".json", ".log"} {
		if _, err := os.Stat(filepath.Join(out, "localtest-cmd-mutate-testdata-tiny"+ext)); err != nil {
			t.Errorf("report: %v", err)
		}
	}
}

// TestUsage: a pattern or several packages are refused before anything
// runs, with exit code 2.
func TestUsage(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"./..."},
		{"./pkg/memstore", "./pkg/pgstore"},
		{"-workers", "0", "./pkg/memstore"},
	} {
		var stdout, stderr strings.Builder
		if code := run(args, &stdout, &stderr); code != 2 {
			t.Errorf("run(%q) = %d, want 2; stderr:\n%s", args, code, stderr.String())
		}
	}
}

// TestFilesMustExist: a -files name that is not one of the package's
// non-test files is an error, not an empty report that reads as a
// perfect score.
func TestFilesMustExist(t *testing.T) {
	for _, files := range [][]string{{"nothing.go"}, {"tiny_test.go"}, {"tiny.go", "typo.go"}} {
		_, err := mutate(options{out: t.TempDir(), pkg: "testdata/tiny", workers: 1, coeff: 1, files: files}, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "is not a non-test Go file") {
			t.Errorf("-files %v: got %v, want the not-a-file error", files, err)
		}
	}
}

// TestEquivalentList: the list's malformed and duplicate entries are
// refused with their line; prose lines are ignored.
func TestEquivalentList(t *testing.T) {
	tests := []struct {
		name, text, wantErr string
		want                int
	}{
		{"entries and prose", "# t\n\nprose\n- `a/b.go:1:2` CONDITIONALS_NEGATION: why\n- `a/b.go:1:2` CONDITIONALS_BOUNDARY: why\n", "", 2},
		{"malformed", "- `a/b.go:1` CONDITIONALS_NEGATION: why\n", "eq.md:1: want", 0},
		{"no reason", "- `a/b.go:1:2` CONDITIONALS_NEGATION\n", "eq.md:1: want", 0},
		{"duplicate", "- `a/b.go:1:2` X: one\n- `a/b.go:1:2` X: two\n", "eq.md:2: a/b.go:1:2 X is listed twice", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "eq.md")
			if err := os.WriteFile(path, []byte(tt.text), 0o644); err != nil {
				t.Fatal(err)
			}
			eq, err := readEquivalent(path, "eq.md")
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || len(eq) != tt.want {
				t.Fatalf("got %d entries, %v; want %d", len(eq), err, tt.want)
			}
		})
	}
}

// TestSummaryFigures: efficacy and mutator coverage as gremlins defines
// them, with timed-out and not viable mutants in neither; a listed
// equivalent counts as lived in the first figure and is left out of the
// second.
func TestSummaryFigures(t *testing.T) {
	var ms []mutant
	add := func(status string, n int) {
		for range n {
			i := len(ms)
			ms = append(ms, mutant{Pos: "p/f.go:" + string(rune('a'+i)) + ":1", Type: "T", Status: status, file: "p/f.go"})
		}
	}
	add("KILLED", 18)
	add("LIVED", 2)
	add("NOT COVERED", 5)
	add("TIMED OUT", 1)
	add("NOT VIABLE", 1)
	eq := map[string]string{ms[18].id(): "why", ms[0].id(): "killed after all", "p/other.go:1:1 T": "another file's: not stale here"}
	got := summarize("./p", ms, eq, time.Second)
	want := "./p: killed 18, lived 2 (1 listed as equivalent), not covered 5, timed out 1, not viable 1; " +
		"efficacy 90.0% (94.7% without the listed), mutator coverage 80.0%; 1s\n"
	if !strings.HasPrefix(got, want) {
		t.Errorf("got\n%s\nwant first line\n%s", got, want)
	}
	if want := "stale entry?       " + ms[0].id() + ": listed as equivalent, KILLED in this run\n"; !strings.Contains(got, want) {
		t.Errorf("got\n%s\nwant a line %q", got, want)
	}
	if strings.Contains(got, "other.go") {
		t.Errorf("an entry for a file not in the report is named stale:\n%s", got)
	}
}

// TestSnapshot: gremlins runs on a copy of the module's sources, without
// its build output, npm's packages or git's files.
func TestSnapshot(t *testing.T) {
	root, dst := t.TempDir(), t.TempDir()
	for _, f := range []string{"go.mod", "pkg/x/x.go", "pkg/x/testdata/in.json", "build/bin/tool", "localtest/node_modules/m/i.js", ".git/HEAD"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, f), []byte(f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := snapshot(root, dst); err != nil {
		t.Fatal(err)
	}
	var got []string
	filepath.WalkDir(dst, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dst, path)
			got = append(got, filepath.ToSlash(rel))
		}
		return err
	})
	if want := []string{"go.mod", "pkg/x/testdata/in.json", "pkg/x/x.go"}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("snapshot holds %v, want %v", got, want)
	}
}
