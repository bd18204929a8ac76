package infra

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// TransformScript is the path, relative to the module root, of the script
// that applies the SAM transform offline with aws-sam-translator.
const TransformScript = "infra/sam/transform.py"

// ToolsHint tells the user how to install the tools [Transform] and [Lint]
// need when the SAM CLI is absent.
const ToolsHint = "pip install cfn-lint aws-sam-translator (or install the AWS SAM CLI, which bundles both)"

// TransformOptions configures [Transform]. The zero value transforms for
// us-east-1 with placeholder code locations and the template's defaults.
type TransformOptions struct {
	// Region is the region SAM builds ARNs for. Empty means us-east-1.
	Region string

	// Code maps a function's logical id to the S3 location of its zipped
	// artifact (s3://bucket/key), as `sam package` writes it. Functions not
	// named get a placeholder location.
	Code map[string]string

	// Parameters are parameter values the transform may use.
	Parameters map[string]string
}

// Tools reports whether the tools [Transform] and [Lint] run are present:
// python3 with aws-sam-translator, and cfn-lint. The error names what is
// missing and wraps [ErrToolMissing].
func Tools(ctx context.Context) error {
	var missing []string
	if _, err := exec.LookPath("cfn-lint"); err != nil {
		missing = append(missing, "cfn-lint")
	}
	if _, err := exec.LookPath("python3"); err != nil {
		missing = append(missing, "python3")
	} else if out, err := exec.CommandContext(ctx, "python3", "-c", "import samtranslator, cfnlint.decode").CombinedOutput(); err != nil {
		missing = append(missing, "the python modules samtranslator and cfnlint ("+strings.TrimSpace(lastLine(out))+")")
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: %s; %s", ErrToolMissing, strings.Join(missing, ", "), ToolsHint)
	}
	return nil
}

// Transform applies the SAM transform (AWS::Serverless-2016-10-31) to the
// template at path offline, with the project's script (TransformScript,
// aws-sam-translator, no AWS calls), and returns the CloudFormation
// template it produces, as JSON. It returns an error wrapping
// [ErrToolMissing] when python3 or the script's modules are missing, and
// one quoting the translator's message when the template is invalid.
func Transform(ctx context.Context, path string, opts TransformOptions) ([]byte, error) {
	root, err := ModuleRoot()
	if err != nil {
		return nil, fmt.Errorf("transform %s: %w", path, err)
	}
	// No Tools check first: it starts Python to import the same modules
	// the script imports, which doubled the cost of every transform. The
	// script's own failure says what is missing.
	args := []string{filepath.Join(root, TransformScript), path}
	if opts.Region != "" {
		args = append(args, "--region", opts.Region)
	}
	for _, id := range sortedKeys(opts.Code) {
		args = append(args, "--code", id+"="+opts.Code[id])
	}
	for _, name := range sortedKeys(opts.Parameters) {
		args = append(args, "--parameter", name+"="+opts.Parameters[name])
	}
	cmd := exec.CommandContext(ctx, "python3", args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	switch {
	case errors.Is(err, exec.ErrNotFound):
		return nil, fmt.Errorf("transform %s: %w: python3; %s", path, ErrToolMissing, ToolsHint)
	case err != nil && bytes.Contains(stderr.Bytes(), []byte("ModuleNotFoundError")):
		return nil, fmt.Errorf("transform %s: %w: the python modules samtranslator and cfnlint (%s); %s",
			path, ErrToolMissing, strings.TrimSpace(lastLine(stderr.Bytes())), ToolsHint)
	case err != nil:
		return nil, fmt.Errorf("transform %s: %w: %s", path, err, strings.TrimSpace(lastLine(stderr.Bytes())))
	}
	if !json.Valid(out) {
		return nil, fmt.Errorf("transform %s: the script printed no JSON template", path)
	}
	return out, nil
}

// RulesDir is the directory, relative to the module root, of the
// library's cfn-lint rules (Python; their docstring lists them: TTL,
// grants from the permissions table PermissionsFile, public Function
// URLs, DescribeTable, the ref and inflight indexes, large-response
// grants, grants broader than dedupe calls, batch item failures). Lint
// appends them to cfn-lint's own.
const RulesDir = "infra/cfnlint"

// Finding is one cfn-lint finding.
type Finding struct {
	// File, Line and Column locate it: the template as the caller named
	// it, 1-based.
	File         string
	Line, Column int
	// Rule is the rule's id, e.g. "E9102"; Level is "Error", "Warning"
	// or "Informational".
	Rule, Level string
	// Message says what is wrong and, for the library's rules, the fix.
	Message string
}

// String formats the finding as one line: "file:line:col: RULE message".
func (f Finding) String() string {
	return fmt.Sprintf("%s:%d:%d: %s %s", f.File, f.Line, f.Column, f.Rule, f.Message)
}

// LintError is the error of Lint and Validate when cfn-lint reports
// findings: each finding once, in file and line order. It wraps ErrLint.
type LintError struct {
	Findings []Finding
}

// Error lists the findings, one per line.
func (e *LintError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d finding(s):", len(e.Findings))
	for _, f := range e.Findings {
		b.WriteString("\n")
		b.WriteString(f.String())
	}
	return b.String()
}

// Unwrap returns ErrLint.
func (e *LintError) Unwrap() error { return ErrLint }

// Lint runs cfn-lint on each template path, with the library's rules
// (RulesDir), from dir so that its configuration file there
// (.cfnlintrc.yaml) applies: every error, warning and informational
// finding not waived there fails. cfn-lint applies the SAM transform
// itself and reports a finding on what SAM generates at the line of the
// template's resource. The error is a *LintError, which wraps ErrLint, when
// there are findings; it wraps [ErrToolMissing] when cfn-lint is not on
// PATH.
func Lint(ctx context.Context, dir string, paths ...string) error {
	if _, err := exec.LookPath("cfn-lint"); err != nil {
		return fmt.Errorf("lint: %w: cfn-lint; %s", ErrToolMissing, ToolsHint)
	}
	abs := make([]string, len(paths))
	given := map[string]string{}
	for i, p := range paths {
		var err error
		if abs[i], err = filepath.Abs(p); err != nil {
			return fmt.Errorf("lint %s: %w", p, err)
		}
		given[abs[i]] = p
	}
	args := []string{"--format", "json", "--"}
	if root, err := ModuleRoot(); err == nil {
		// The library's own rules (RulesDir).
		args = []string{"--append-rules", filepath.Join(root, RulesDir), "--format", "json", "--"}
	}
	cmd := exec.CommandContext(ctx, "cfn-lint", append(args, abs...)...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		return fmt.Errorf("lint %s: %w", strings.Join(paths, " "), err)
	}
	var raw []struct {
		Filename string
		Level    string
		Message  string
		Location struct {
			Start struct{ LineNumber, ColumnNumber int }
		}
		Rule struct{ Id string }
	}
	if jerr := json.Unmarshal(out, &raw); jerr != nil {
		code := 0
		if ee != nil {
			code = ee.ExitCode()
		}
		return fmt.Errorf("%w: cfn-lint %s (exit %d) printed no report: %s%s", ErrLint, strings.Join(paths, " "), code, out, stderr.Bytes())
	}
	var findings []Finding
	seen := map[Finding]bool{}
	for _, r := range raw {
		file, ok := given[r.Filename]
		if !ok {
			if a, err := filepath.Abs(filepath.Join(dir, r.Filename)); err == nil && given[a] != "" {
				file = given[a]
			} else {
				file = r.Filename
			}
		}
		f := Finding{File: file, Line: r.Location.Start.LineNumber, Column: r.Location.Start.ColumnNumber,
			Rule: r.Rule.Id, Level: r.Level, Message: r.Message}
		if !seen[f] {
			seen[f] = true
			findings = append(findings, f)
		}
	}
	sort.SliceStable(findings, func(i, j int) bool {
		a, b := findings[i], findings[j]
		if a.File != b.File {
			return a.File < b.File
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Rule < b.Rule
	})
	if len(findings) > 0 {
		return &LintError{Findings: findings}
	}
	if ee != nil {
		return fmt.Errorf("%w: cfn-lint %s (exit %d) with no finding: %s", ErrLint, strings.Join(paths, " "), ee.ExitCode(), stderr.Bytes())
	}
	return nil
}

// Validate checks the template at path with AWS's own tools, as `make
// validate` does: `sam validate --lint` when the SAM CLI is on PATH,
// otherwise the offline SAM transform (which it writes to transformed: a
// path; empty means a temporary file, removed afterwards), and in both
// cases [Lint] of the template, whose error lists each finding once. It
// returns what it ran, one line per command.
func Validate(ctx context.Context, path, transformed string) ([]string, error) {
	dir := filepath.Dir(path)
	if _, err := exec.LookPath("sam"); err == nil {
		cmd := exec.CommandContext(ctx, "sam", "validate", "--lint", "--template", path)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("%w: sam validate --lint: %v:\n%s", ErrLint, err, out)
		}
		ran := []string{"sam validate --lint --template " + path}
		// sam validate cannot load rules of its own; cfn-lint can.
		if _, err := exec.LookPath("cfn-lint"); err == nil {
			if err := Lint(ctx, dir, path); err != nil {
				return nil, err
			}
			ran = append(ran, "cfn-lint --append-rules "+RulesDir+" -- "+path)
		}
		return ran, nil
	}
	// The transform proves the template transforms with the translator
	// sam deploy uses, and leaves the result to read; cfn-lint lints the
	// template itself, transformed its own way, so that each finding
	// comes once and points at the template's own line.
	out, err := Transform(ctx, path, TransformOptions{})
	if err != nil {
		return nil, err
	}
	if transformed == "" {
		f, err := os.CreateTemp("", "template.transformed.*.json")
		if err != nil {
			return nil, fmt.Errorf("validate %s: %w", path, err)
		}
		transformed = f.Name()
		f.Close()
		defer os.Remove(transformed)
	}
	if transformed, err = filepath.Abs(transformed); err != nil {
		return nil, fmt.Errorf("validate %s: %w", path, err)
	}
	if err := os.WriteFile(transformed, out, 0o644); err != nil {
		return nil, fmt.Errorf("validate %s: %w", path, err)
	}
	if err := Lint(ctx, dir, path); err != nil {
		return nil, err
	}
	return []string{
		"python3 " + TransformScript + " " + path + " > " + transformed,
		"cfn-lint --append-rules " + RulesDir + " -- " + path,
	}, nil
}

// sortedKeys returns m's keys in order.
func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// lastLine returns the last non-empty line of b: a Python traceback's
// message.
func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}
