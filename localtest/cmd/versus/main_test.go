package main

import (
	"bytes"
	"go/format"
	"strings"
	"testing"

	"github.com/lambda-dedupe/dedupe/internal/maketest"
	"github.com/lambda-dedupe/dedupe/localtest/dynalite"
)

// TestShort compares the tree with its own HEAD at a few requests per
// scenario, so that a comparison that no longer builds or runs (a rig
// the API outgrew, a renaming that misses an import) fails `make test`
// rather than a user's `make versus`. It needs git, the Go toolchain and
// the modules of both trees (the module cache or the proxy), and
// dynalite.
func TestShort(t *testing.T) {
	dynalite.Endpoint(t)
	var out bytes.Buffer
	if err := run(t.Context(), "HEAD", 5, &out); err != nil {
		t.Fatalf("versus -ref HEAD -short: %v\n%s", err, out.String())
	}
	t.Log("\n" + out.String())
	for _, want := range []string{"base fresh", "tree replay", "base replay's calls, raw", "tree: a fresh request's claim", "base: a fresh request's completion", "tree over base, p50: fresh ", "the guard's own time on a replay", "base fresh request's calls, raw", "each guard over its own calls sent raw (its floor), p50: fresh base "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the comparison prints no %q", want)
		}
	}
}

// TestRefThatNamesNoCommit: a ref that is not a commit of the repository
// is refused by name before anything is built.
func TestRefThatNamesNoCommit(t *testing.T) {
	dynalite.Endpoint(t)
	err := run(t.Context(), "no-such-ref-anywhere", 5, new(bytes.Buffer))
	if err == nil || !strings.Contains(err.Error(), `-ref "no-such-ref-anywhere" names no commit`) {
		t.Errorf("run with a ref that names nothing: %v, want it refused by name", err)
	}
}

// TestRenameTouchesOnlyThisModule: the base tree's imports of this
// module's packages are renamed; a longer module path that begins with
// this one's is not.
func TestRenameTouchesOnlyThisModule(t *testing.T) {
	for in, want := range map[string]string{
		`import "github.com/lambda-dedupe/dedupe/pkg/dedupe"`: `import "github.com/lambda-dedupe/dedupebase/pkg/dedupe"`,
		"module github.com/lambda-dedupe/dedupe\n\ngo 1.26":   "module github.com/lambda-dedupe/dedupebase\n\ngo 1.26",
		"module github.com/lambda-dedupe/dedupe":              "module github.com/lambda-dedupe/dedupebase",
		`import "github.com/lambda-dedupe/dedupe-contrib/x"`:  `import "github.com/lambda-dedupe/dedupe-contrib/x"`,
		`import "github.com/lambda-dedupe/dedupers"`:          `import "github.com/lambda-dedupe/dedupers"`,
		`x "github.com/lambda-dedupe/dedupe"`:                 `x "github.com/lambda-dedupe/dedupebase"`,
	} {
		if got := string(modulePath.ReplaceAll([]byte(in), []byte(baseModule+"$1"))); got != want {
			t.Errorf("rename %q = %q, want %q", in, got, want)
		}
	}
}

// TestMakeVersusRunsThisCommand: `make versus` runs this command, whose
// run TestShort exercises.
func TestMakeVersusRunsThisCommand(t *testing.T) {
	out := maketest.DryRun(t, "versus", "REF=v0")
	if !strings.Contains(out, "go run ./localtest/cmd/versus -ref v0") {
		t.Errorf("make -n versus does not run ./localtest/cmd/versus -ref v0:\n%s", out)
	}
}

// TestRigSourceIsFormatted: the rig is Go source kept as text (so that
// this module does not build it); it is held to gofmt as the rest is.
func TestRigSourceIsFormatted(t *testing.T) {
	got, err := format.Source(rigSource)
	if err != nil {
		t.Fatalf("rig/main.go.txt does not parse: %v", err)
	}
	if !bytes.Equal(got, rigSource) {
		t.Error("rig/main.go.txt needs gofmt")
	}
}
