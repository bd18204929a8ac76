package apicompat_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lambda-dedupe/dedupe/internal/apicompat"
)

// apidiff builds the module's apidiff once per test binary.
func apidiff(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "apidiff")
	cmd := exec.Command("go", "build", "-o", bin, "golang.org/x/exp/cmd/apidiff")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build apidiff: %v\n%s", err, out)
	}
	return bin
}

// module writes a module example.com/m with one package, pkg/a, whose
// source is src, and a changelog whose Unreleased heading is heading.
func module(t *testing.T, dir, src, heading string) {
	t.Helper()
	files := map[string]string{
		"go.mod":       "module example.com/m\n\ngo 1.24\n",
		"pkg/a/a.go":   "// Package a is a package.\npackage a\n\n" + src,
		"CHANGELOG.md": "# Changelog\n\n" + heading + "\n\n- a change\n\n## [v0.1.0] - 2026-12-01\n",
	}
	for name, data := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCheck releases v0.1.0 of a package, changes its API, and checks
// what the check says: the deliberately breaking change (a removed
// function, a changed signature) fails it unless the changelog names a
// breaking bump.
func TestCheck(t *testing.T) {
	t.Setenv("GOWORK", "off")
	t.Setenv("GOFLAGS", "-mod=mod")
	bin := apidiff(t)
	const v010 = "func Run(key string) error { return nil }\n\nfunc Keep() {}\n"
	tests := []struct {
		name    string
		src     string
		heading string
		wantErr error
		want    string
	}{
		{"unchanged", v010, "## [Unreleased]", nil, "ok: compatible with v0.1.0"},
		{"addition", v010 + "\nfunc New() {}\n", "## [Unreleased]", nil, "ok: compatible with v0.1.0"},
		{"removal", "func Run(key string) error { return nil }\n", "## [Unreleased]", apicompat.ErrIncompatible, "Keep: removed"},
		{"changed signature", "func Run(key, fp string) error { return nil }\n\nfunc Keep() {}\n", "## [Unreleased]", apicompat.ErrIncompatible, "Run: changed from func(string) error to func(string, string) error"},
		{"patch named", "func Run(key string) error { return nil }\n", "## [Unreleased] (v0.1.1)", apicompat.ErrIncompatible, "not a breaking bump over v0.1.0"},
		{"minor named while v0", "func Run(key string) error { return nil }\n", "## [Unreleased] (v0.2.0)", nil, "allowed by the changelog's Unreleased (v0.2.0)"},
		{"named version not after the snapshot", v010, "## [Unreleased] (v0.1.0)", apicompat.ErrChangelog, "not after the last release's snapshot v0.1.0"},
		{"no version in parentheses", v010, "## [Unreleased] (soon)", apicompat.ErrChangelog, `"soon" is not a release version`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			module(t, dir, v010, "## [Unreleased]")
			var out bytes.Buffer
			o := apicompat.Options{Dir: dir, Packages: []string{"example.com/m/pkg/a"}, Apidiff: []string{bin}, Out: &out}
			ctx := context.Background()
			if err := apicompat.Check(ctx, o); err != nil || !strings.Contains(out.String(), "no API snapshot") {
				t.Fatalf("before a release: %v, %q; want ok, no snapshot", err, out.String())
			}
			if err := apicompat.Snapshot(ctx, o, "v0.1.0"); err != nil {
				t.Fatal(err)
			}
			if err := apicompat.Snapshot(ctx, o, "v0.1.0"); !errors.Is(err, apicompat.ErrSnapshotExists) {
				t.Errorf("second snapshot of v0.1.0: %v, want ErrSnapshotExists", err)
			}
			module(t, dir, tt.src, tt.heading)
			out.Reset()
			err := apicompat.Check(ctx, o)
			t.Logf("check:\n%s%v", out.String(), err)
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Fatalf("got %v, want %v", err, tt.wantErr)
			}
			if got := out.String() + errString(err); !strings.Contains(got, tt.want) {
				t.Errorf("got %q, want it to say %q", got, tt.want)
			}
		})
	}
}

// TestRemovedPackage checks that a package of the snapshot that is gone
// is an incompatible change.
func TestRemovedPackage(t *testing.T) {
	t.Setenv("GOWORK", "off")
	bin := apidiff(t)
	dir := t.TempDir()
	module(t, dir, "func Run() {}\n", "## [Unreleased]")
	var out bytes.Buffer
	o := apicompat.Options{Dir: dir, Packages: []string{"example.com/m/pkg/a"}, Apidiff: []string{bin}, Out: &out}
	if err := apicompat.Snapshot(context.Background(), o, "v0.1.0"); err != nil {
		t.Fatal(err)
	}
	o.Packages = nil
	if err := apicompat.Check(context.Background(), o); !errors.Is(err, apicompat.ErrIncompatible) || !strings.Contains(out.String(), "example.com/m/pkg/a: removed since v0.1.0") {
		t.Errorf("got %v, %q; want ErrIncompatible naming the package", err, out.String())
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
