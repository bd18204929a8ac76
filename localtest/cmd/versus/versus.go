package main

import (
	"archive/tar"
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/lambda-dedupe/dedupe/infra"
)

// rigSource is the program that measures both guards.
//
//go:embed rig/main.go.txt
var rigSource []byte

// module is this tree's module path, and baseModule the one the base
// tree is renamed to, so that one program can import both.
const (
	module     = "github.com/lambda-dedupe/dedupe"
	baseModule = "github.com/lambda-dedupe/dedupebase"
)

// modulePath matches the module path where it names this module or one
// of its packages, not where it begins a longer name.
var modulePath = regexp.MustCompile(regexp.QuoteMeta(module) + `([/"\s]|$)`)

// run measures the guard at ref beside the working tree's and writes the
// rig's table to w.
func run(ctx context.Context, ref string, n int, w io.Writer) error {
	if n < 1 {
		return fmt.Errorf("-n %d: at least one request per scenario", n)
	}
	if os.Getenv("AWS_ENDPOINT_URL_DYNAMODB") == "" {
		return errors.New("AWS_ENDPOINT_URL_DYNAMODB is not set: `make versus` starts dynalite and sets it")
	}
	root, err := infra.ModuleRoot()
	if err != nil {
		return err
	}
	commit, err := output(ctx, root, nil, "git", "rev-parse", "--verify", "--quiet", ref+"^{commit}")
	if err != nil {
		return fmt.Errorf("-ref %q names no commit of this repository: %w", ref, err)
	}
	commit = strings.TrimSpace(commit)
	dir := filepath.Join(root, "build", "versus")
	base, rig := filepath.Join(dir, "base"), filepath.Join(dir, "rig")
	for _, d := range []string{base, rig} {
		if err := os.RemoveAll(d); err != nil {
			return err
		}
	}
	archive, err := output(ctx, root, nil, "git", "archive", "--format=tar", commit)
	if err != nil {
		return fmt.Errorf("export %s: %w", ref, err)
	}
	if err := extract(strings.NewReader(archive), base); err != nil {
		return fmt.Errorf("export %s: %w", ref, err)
	}
	if err := rename(base); err != nil {
		return fmt.Errorf("rename %s's module: %w", ref, err)
	}
	if err := writeRig(root, base, rig); err != nil {
		return err
	}
	env := append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	if _, err := output(ctx, rig, env, "go", "mod", "tidy"); err != nil {
		return fmt.Errorf("resolve the modules of %s and the tree: %w", ref, err)
	}
	if _, err := output(ctx, rig, env, "go", "build", "-o", "rig", "."); err != nil {
		return fmt.Errorf("build the comparison (does %s have the API doc.go names?): %w", ref, err)
	}
	fmt.Fprintf(w, "versus: base %s (%.12s), tree %s, %d requests per scenario, in turns\n", ref, commit, root, n)
	cmd := exec.CommandContext(ctx, filepath.Join(rig, "rig"), "-n", fmt.Sprint(n))
	cmd.Stdout, cmd.Stderr = w, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("the comparison failed: %w", err)
	}
	return nil
}

// output runs name with args in dir (env nil: this process's) and
// returns its standard output; its standard error is in the error.
func output(ctx context.Context, dir string, env []string, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir, cmd.Env = dir, env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

// extract writes the regular files and directories of the tar stream r
// under dir.
func extract(r io.Reader, dir string) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if !filepath.IsLocal(h.Name) {
			return fmt.Errorf("archive entry %q is outside the tree", h.Name)
		}
		path := filepath.Join(dir, h.Name)
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(path, 0o755)
		case tar.TypeReg:
			err = writeFile(path, tr, fs.FileMode(h.Mode)&0o755)
		}
		if err != nil {
			return err
		}
	}
}

func writeFile(path string, r io.Reader, mode fs.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode|0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// rename gives the tree under dir the module path baseModule, in go.mod
// and in every Go file's imports.
func rename(dir string) error {
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !(strings.HasSuffix(path, ".go") || d.Name() == "go.mod") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		renamed := modulePath.ReplaceAll(b, []byte(baseModule+"$1"))
		if bytes.Equal(renamed, b) {
			return nil
		}
		return os.WriteFile(path, renamed, 0o644)
	})
}

// goVersion matches go.mod's go directive.
var goVersion = regexp.MustCompile(`(?m)^go (\S+)$`)

// writeRig writes the comparison program's module into rig: its source,
// a go.mod that replaces both modules with the trees on disk, and the
// union of the trees' go.sum files.
func writeRig(root, base, rig string) error {
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		return err
	}
	v := goVersion.FindSubmatch(mod)
	if v == nil {
		return errors.New("go.mod has no go directive")
	}
	var sum []byte
	for _, d := range []string{root, base} {
		b, err := os.ReadFile(filepath.Join(d, "go.sum"))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		sum = append(sum, b...)
	}
	gomod := fmt.Sprintf("module versusrig\n\ngo %s\n\nrequire (\n\t%s v0.0.0\n\t%s v0.0.0\n)\n\nreplace %s => %s\n\nreplace %s => %s\n",
		v[1], module, baseModule, module, root, baseModule, base)
	if err := os.MkdirAll(rig, 0o755); err != nil {
		return err
	}
	for name, b := range map[string][]byte{"main.go": rigSource, "go.mod": []byte(gomod), "go.sum": sum} {
		if err := os.WriteFile(filepath.Join(rig, name), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}
