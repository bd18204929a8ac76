package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lambda-dedupe/dedupe/infra"
	"github.com/lambda-dedupe/dedupe/internal/maketest"
)

// needTools skips (fails in CI) when run exits 3: a tool is missing.
func needTools(t *testing.T, code int, stderr string) {
	t.Helper()
	if code != 3 {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("required in CI: %s", stderr)
	}
	t.Skip(strings.TrimSpace(stderr))
}

// TestValidate is `make validate`, through this command's run: the
// project's template passes, and a template with findings fails with
// each finding printed once, located and with its fix.
func TestValidate(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	code := run([]string{"-o", filepath.Join(t.TempDir(), "t.json")}, &stdout, &stderr)
	needTools(t, code, stderr.String())
	if code != 0 {
		t.Fatalf("validate of template.yaml exited %d:\n%s%s", code, stdout.String(), stderr.String())
	}
}

func TestValidateFindings(t *testing.T) {
	t.Parallel()
	root, err := infra.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(filepath.Join(root, "infra", "testdata", "lint", "guard-grants.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// The guard's grants are short, and the function is public too.
	path := filepath.Join(t.TempDir(), "template.yaml")
	src = append(src, "      FunctionUrlConfig: {AuthType: NONE}\n"...)
	if err := os.WriteFile(path, src, 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := run([]string{"-o", filepath.Join(t.TempDir(), "t.json"), path}, &stdout, &stderr)
	needTools(t, code, stderr.String())
	if code != 1 {
		t.Fatalf("exit %d, want 1:\n%s%s", code, stdout.String(), stderr.String())
	}
	out := stderr.String()
	for _, rule := range []string{"E9102", "E9103"} {
		if n := strings.Count(out, ": "+rule+" "); n != 1 {
			t.Errorf("%s printed %d times, want once:\n%s", rule, n, out)
		}
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.HasPrefix(line, "validate: ") {
			continue
		}
		if !strings.HasPrefix(line, path+":") || !strings.Contains(line, "fix: ") {
			t.Errorf("finding %q: want %s:line:col and a fix", line, path)
		}
	}
}

// TestMakeValidateRunsThisCommand: `make validate` runs this command.
func TestMakeValidateRunsThisCommand(t *testing.T) {
	out := maketest.DryRun(t, "validate")
	if !strings.Contains(out, "go run ./infra/cmd/validate ") {
		t.Errorf("make -n validate does not run ./infra/cmd/validate:\n%s", out)
	}
}
