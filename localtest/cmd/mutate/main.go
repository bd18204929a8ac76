// Command mutate is `make mutate`: gremlins over one package's own tests,
// with a report per package in build/mutate. See doc.go.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// options are the command's flags and argument.
type options struct {
	out        string
	files      []string // file names; nil means all
	equivalent string
	workers    int
	coeff      int
	verbose    bool
	recheck    string // a gremlins report whose survivors are tested again; "" runs gremlins
	pkg        string
}

// run implements the command and returns its exit code.
func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mutate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.StringVar(&o.out, "out", "build/mutate", "`directory` for the report")
	files := fs.String("files", "", "mutate only these files of the package, a comma-separated `list` of names such as guard.go,cache.go (default: all)")
	fs.StringVar(&o.equivalent, "equivalent", "docs/mutants/equivalent.md", "the `file` listing the equivalent mutants")
	fs.IntVar(&o.workers, "workers", 1, "mutants tested at once (gremlins --workers)")
	fs.IntVar(&o.coeff, "timeout-coefficient", 3, "a mutant's tests time out after this many times the unmutated tests' time (gremlins --timeout-coefficient)")
	fs.BoolVar(&o.verbose, "v", false, "copy gremlins' output to standard error")
	fs.StringVar(&o.recheck, "recheck", "", "instead of running gremlins, test the LIVED and NOT COVERED mutants of this gremlins `report` (a .json) again, by hand")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: mutate [-out DIR] [-files F.go,G.go] [-recheck REPORT.json] [-workers N] [-timeout-coefficient N] [-equivalent FILE] [-v] PKG")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 1 || strings.HasSuffix(fs.Arg(0), "...") {
		fmt.Fprintln(stderr, "mutate: want one package directory, such as ./pkg/memstore (not a pattern)")
		fs.Usage()
		return 2
	}
	o.pkg = fs.Arg(0)
	if *files != "" {
		o.files = strings.Split(*files, ",")
	}
	if o.workers < 1 || o.coeff < 1 {
		fmt.Fprintln(stderr, "mutate: -workers and -timeout-coefficient must be at least 1")
		return 2
	}
	if o.recheck != "" {
		sum, nMoved, err := recheck(o, stderr)
		if err != nil {
			fmt.Fprintf(stderr, "mutate: recheck: %v\n", err)
			return 1
		}
		fmt.Fprint(stdout, sum)
		if nMoved > 0 {
			fmt.Fprintf(stderr, "mutate: recheck incomplete: %d mutants are not where the report puts them (listed as MOVED); run gremlins again\n", nMoved)
			return 1
		}
		return 0
	}
	sum, err := mutate(o, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "mutate: %v\n", err)
		return 1
	}
	fmt.Fprint(stdout, sum)
	return 0
}

// mutate runs gremlins for o and returns the summary it wrote.
func mutate(o options, stderr io.Writer) (string, error) {
	root, rel, err := locate(o.pkg)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(root, filepath.FromSlash(rel))
	excludes, n, err := excludes(dir, o.files)
	if err != nil {
		return "", err
	}
	if n == 0 {
		return "", fmt.Errorf("%s: no non-test Go file to mutate", o.pkg)
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return "", err
	}
	base := filepath.Join(o.out, strings.ReplaceAll(rel, "/", "-"))
	report, logFile := base+".json", base+".log"
	if err := os.Remove(report); err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	if report, err = filepath.Abs(report); err != nil {
		return "", err
	}
	logf, err := os.Create(logFile)
	if err != nil {
		return "", err
	}
	defer logf.Close()

	// gremlins parses each file when it reaches it and copies the module
	// once per worker: run it on a snapshot, so that an edit made while
	// it runs (a test being written, a mutant tried by hand) cannot end
	// up in its mutants.
	src, err := os.MkdirTemp("", "mutate-src-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(src)
	if err := snapshot(root, src); err != nil {
		return "", fmt.Errorf("snapshot the module: %w", err)
	}
	args := []string{"tool", "gremlins", "unleash",
		"--workers", fmt.Sprint(o.workers),
		"--timeout-coefficient", fmt.Sprint(o.coeff),
		"-o", report}
	for _, e := range excludes {
		args = append(args, "-E", e)
	}
	args = append(args, filepath.Join(src, filepath.FromSlash(rel)))
	cmd := exec.Command("go", args...)
	cmd.Dir = src
	// gremlins times a mutant's tests out at a multiple of its coverage
	// run's time: a coverage result from go test's cache would make that
	// a fraction of a second.
	cmd.Env = append(os.Environ(), "GOFLAGS="+strings.TrimSpace(os.Getenv("GOFLAGS")+" -count=1"))
	cmd.Stdout, cmd.Stderr = logf, logf
	if o.verbose {
		cmd.Stdout = io.MultiWriter(logf, stderr)
		cmd.Stderr = cmd.Stdout
	}
	fmt.Fprintf(stderr, "mutate: go %s (%d files; output in %s)\n", strings.Join(args, " "), n, logFile)
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("gremlins: %w (see %s)", err, logFile)
	}
	if err := stillAnswering(context.Background(), serverWait); err != nil {
		return "", err
	}
	res, err := readReport(report, rel)
	if err != nil {
		return "", fmt.Errorf("%w (see %s)", err, logFile)
	}
	eq, err := readEquivalent(filepath.Join(root, o.equivalent), o.equivalent)
	if err != nil {
		return "", err
	}
	sum := summarize(o.pkg, res, eq, time.Since(start))
	if err := os.WriteFile(base+".txt", []byte(sum), 0o644); err != nil {
		return "", err
	}
	return sum, nil
}

// locate returns the root of the module that holds the package
// directory pkg, and pkg's path from it (slash-separated).
func locate(pkg string) (root, rel string, _ error) {
	dir, err := filepath.Abs(pkg)
	if err != nil {
		return "", "", err
	}
	if root, err = moduleRoot(dir); err != nil {
		return "", "", err
	}
	rel, err = filepath.Rel(root, dir)
	if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
		return "", "", fmt.Errorf("%s is not a package directory below the module root %s", pkg, root)
	}
	return root, filepath.ToSlash(rel), nil
}

// skipDirs are the directories snapshot leaves out: build output, npm's
// packages and git's own.
var skipDirs = map[string]bool{"build": true, "node_modules": true, ".git": true}

// snapshot copies the regular files of the module at root into dst,
// leaving out skipDirs.
func snapshot(root, dst string) error {
	return filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		switch {
		case d.IsDir() && skipDirs[d.Name()] && rel != ".":
			return filepath.SkipDir
		case d.IsDir():
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		case !d.Type().IsRegular():
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, info.Mode().Perm())
	})
}

// moduleRoot returns the directory of the go.mod at or above dir.
func moduleRoot(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no go.mod at or above %s", dir)
		}
	}
}

// excludes returns gremlins' --exclude-files expressions (matched against
// paths relative to dir) that keep it to dir's own non-test files, those
// named in files when it is not nil, and how many files that leaves. A
// name in files that is not such a file is an error.
func excludes(dir string, files []string) ([]string, int, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, 0, err
	}
	ex := []string{"/"} // any file below dir: a package of its own
	n := 0
	own := make(map[string]bool)
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		own[name] = true
		if files != nil && !slices.Contains(files, name) {
			ex = append(ex, "^"+regexp.QuoteMeta(name)+"$")
			continue
		}
		n++
	}
	for _, f := range files {
		if !own[f] {
			return nil, 0, fmt.Errorf("-files: %s is not a non-test Go file of %s", f, dir)
		}
	}
	return ex, n, nil
}
