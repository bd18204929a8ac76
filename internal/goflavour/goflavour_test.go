package goflavour_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/lambda-dedupe/dedupe/internal/goflavour"
)

func TestArgsAndEnv(t *testing.T) {
	for _, tt := range []struct {
		f    goflavour.Flavour
		args []string
		env  []string
	}{
		{goflavour.Flavour{}, nil, nil},
		{goflavour.Flavour{Race: true, Trimpath: true, CGO: "1"}, []string{"-race", "-trimpath"}, []string{"CGO_ENABLED=1"}},
		{goflavour.Flavour{Trimpath: true, CGO: "0"}, []string{"-trimpath"}, []string{"CGO_ENABLED=0"}},
	} {
		if got := tt.f.Args(); !slices.Equal(got, tt.args) {
			t.Errorf("%+v.Args() = %q, want %q", tt.f, got, tt.args)
		}
		if got := tt.f.Env(); !slices.Equal(got, tt.env) {
			t.Errorf("%+v.Env() = %q, want %q", tt.f, got, tt.env)
		}
	}
}

// TestOwnRoundTrips builds a program with the test binary's own flavour
// (Own's Args and Env), and reads back the same flavour with Of: what a
// test builds this way shares its compiled packages.
func TestOwnRoundTrips(t *testing.T) {
	own := goflavour.Own()
	dir := t.TempDir()
	src := filepath.Join(dir, "main.go")
	if err := os.WriteFile(src, []byte("package main\n\nfunc main() {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "prog")
	cmd := exec.Command("go", append(append([]string{"build"}, own.Args()...), "-o", bin, src)...)
	cmd.Env = append(os.Environ(), own.Env()...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	got, err := goflavour.Of(bin)
	if err != nil {
		t.Fatal(err)
	}
	if got != own {
		t.Errorf("Of(built with Own's flags) = %+v, want %+v", got, own)
	}
}

func TestOfNotABinary(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x")
	if err := os.WriteFile(path, []byte("not a binary"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := goflavour.Of(path); err == nil {
		t.Error("Of(a text file) succeeded, want an error")
	}
}
