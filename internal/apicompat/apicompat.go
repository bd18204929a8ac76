// Package apicompat checks the Go API of the module's public packages
// against the API of the last release, with golang.org/x/exp/cmd/apidiff.
//
// At a release, Snapshot writes each package's export data (apidiff -w)
// under api/<version>/, one file per package named by its path in the
// module (api/v0.1.0/pkg/dedupe.apidiff), and the files are committed: the
// check then needs no tag and no network. Check compares the working tree
// with the newest snapshot. An incompatible change fails the check unless
// the CHANGELOG's Unreleased heading names the version that ships it, and
// that version is a breaking bump over the snapshot's (MINOR while the
// major version is 0, MAJOR after): "## [Unreleased] (v0.2.0)". With no
// snapshot the check passes and says so. docs/versioning.md states the
// rule for users.
package apicompat

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"golang.org/x/mod/semver"
)

// Ext ends the name of every export data file of a snapshot.
const Ext = ".apidiff"

// Errors of Check and Snapshot.
var (
	// ErrIncompatible reports incompatible changes that the CHANGELOG
	// does not allow.
	ErrIncompatible = errors.New("apicompat: incompatible API changes")
	// ErrChangelog reports an Unreleased heading that names no valid
	// version, or one that is not after the snapshot's.
	ErrChangelog = errors.New("apicompat: CHANGELOG.md's Unreleased heading")
	// ErrSnapshotExists reports a Snapshot of a version already written:
	// a release's API never changes.
	ErrSnapshotExists = errors.New("apicompat: snapshot exists")
)

// Options says where the module, its snapshots and its changelog are, and
// which packages the promise covers.
type Options struct {
	// Dir is the module's root directory (holding go.mod).
	Dir string
	// Packages are the import paths checked, as `go list ./pkg/...`
	// prints them.
	Packages []string
	// APIDir holds the snapshots, one directory per version. Empty
	// means Dir/api.
	APIDir string
	// Changelog is the changelog's path. Empty means Dir/CHANGELOG.md.
	Changelog string
	// Apidiff is the command that runs apidiff, run in Dir. Nil means
	// go tool apidiff (the module's tool dependency).
	Apidiff []string
	// Out receives the report. Nil means os.Stdout.
	Out io.Writer
}

func (o *Options) defaults() {
	if o.APIDir == "" {
		o.APIDir = filepath.Join(o.Dir, "api")
	}
	if o.Changelog == "" {
		o.Changelog = filepath.Join(o.Dir, "CHANGELOG.md")
	}
	if o.Apidiff == nil {
		o.Apidiff = []string{"go", "tool", "apidiff"}
	}
	if o.Out == nil {
		o.Out = os.Stdout
	}
}

// Snapshot writes the API of every package of o.Packages into
// APIDir/version/. It refuses a version that is not a semantic version
// (v1.2.3) or whose snapshot exists.
func Snapshot(ctx context.Context, o Options, version string) error {
	o.defaults()
	if !semver.IsValid(version) || semver.Canonical(version) != version || semver.Prerelease(version) != "" {
		return fmt.Errorf("apicompat: version %q: want a release version such as v0.1.0", version)
	}
	dir := filepath.Join(o.APIDir, version)
	if _, err := os.Stat(dir); err == nil {
		return fmt.Errorf("%w: %s: a release's API is written once", ErrSnapshotExists, dir)
	}
	mod, err := modulePath(o.Dir)
	if err != nil {
		return err
	}
	for _, pkg := range o.Packages {
		file := filepath.Join(dir, filepath.FromSlash(relPath(mod, pkg))+Ext)
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			return err
		}
		if _, err := run(ctx, o, "-w", file, pkg); err != nil {
			return err
		}
		fmt.Fprintf(o.Out, "apicompat: wrote %s\n", rel(o.Dir, file))
	}
	return nil
}

// Check compares the API of o.Packages with the newest snapshot and
// writes a report to o.Out. It returns an error wrapping ErrIncompatible
// when a change is incompatible and the changelog does not allow it.
func Check(ctx context.Context, o Options) error {
	o.defaults()
	version, err := newest(o.APIDir)
	if err != nil {
		return err
	}
	if version == "" {
		fmt.Fprintf(o.Out, "apicompat: ok: no API snapshot under %s, nothing to compare with (write one at each release: make api-snapshot VERSION=vX.Y.Z)\n", rel(o.Dir, o.APIDir))
		return nil
	}
	mod, err := modulePath(o.Dir)
	if err != nil {
		return err
	}
	dir := filepath.Join(o.APIDir, version)
	old := map[string]string{} // import path -> export data file
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, Ext) {
			return err
		}
		r, _ := filepath.Rel(dir, strings.TrimSuffix(path, Ext))
		old[mod+"/"+filepath.ToSlash(r)] = path
		return nil
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(o.Out, "apicompat: comparing %s with the API of %s (%s)\n", packages(len(o.Packages)), version, rel(o.Dir, dir))
	current := map[string]bool{}
	var broken []string
	for _, pkg := range o.Packages {
		current[pkg] = true
		file, ok := old[pkg]
		if !ok {
			fmt.Fprintf(o.Out, "apicompat: %s: new since %s\n", pkg, version)
			continue
		}
		out, err := run(ctx, o, "-incompatible", file, pkg)
		if err != nil {
			return err
		}
		if report := strings.TrimSpace(string(out)); report != "" {
			broken = append(broken, pkg)
			fmt.Fprintf(o.Out, "apicompat: %s: incompatible with %s:\n%s\n", pkg, version, indent(report))
		}
	}
	var gone []string
	for pkg := range old {
		if !current[pkg] {
			gone = append(gone, pkg)
		}
	}
	sort.Strings(gone)
	for _, pkg := range gone {
		broken = append(broken, pkg)
		fmt.Fprintf(o.Out, "apicompat: %s: removed since %s\n", pkg, version)
	}
	next, err := unreleasedVersion(o.Changelog)
	if err != nil {
		return err
	}
	if next != "" && semver.Compare(next, version) <= 0 {
		return fmt.Errorf("%w names %s, which is not after the last release's snapshot %s: name the next version", ErrChangelog, next, version)
	}
	if len(broken) == 0 {
		fmt.Fprintf(o.Out, "apicompat: ok: compatible with %s\n", version)
		return nil
	}
	want := breakingBump(version)
	if next != "" && breaking(version, next) {
		fmt.Fprintf(o.Out, "apicompat: ok: incompatible changes in %s, allowed by the changelog's Unreleased (%s), a breaking bump over %s\n", packages(len(broken)), next, version)
		return nil
	}
	why := "the changelog's Unreleased heading names no version"
	if next != "" {
		why = fmt.Sprintf("the changelog's Unreleased names %s, which is not a breaking bump over %s", next, version)
	}
	return fmt.Errorf("%w in %s against %s: %s; list them under Unreleased and name the version that ships them, \"## [Unreleased] (%s)\" (docs/versioning.md, \"The API check\")",
		ErrIncompatible, packages(len(broken)), version, why, want)
}

// packages returns "1 package" or "n packages".
func packages(n int) string {
	if n == 1 {
		return "1 package"
	}
	return fmt.Sprintf("%d packages", n)
}

// breaking reports whether next is a breaking bump over last: a new
// major version, or a new minor one while the major version is 0.
func breaking(last, next string) bool {
	if semver.Major(next) != semver.Major(last) {
		return semver.Compare(next, last) > 0
	}
	return semver.Major(last) == "v0" && semver.Compare(semver.MajorMinor(next), semver.MajorMinor(last)) > 0
}

// breakingBump returns the smallest breaking bump over last.
func breakingBump(last string) string {
	var major, minor, patch int
	fmt.Sscanf(last, "v%d.%d.%d", &major, &minor, &patch)
	if major == 0 {
		return fmt.Sprintf("v0.%d.0", minor+1)
	}
	return fmt.Sprintf("v%d.0.0", major+1)
}

// unreleasedRE matches the changelog's Unreleased heading, with the
// version it names, if any: "## [Unreleased]" or "## [Unreleased] (v0.2.0)".
var unreleasedRE = regexp.MustCompile(`^##\s+\[?Unreleased\]?\s*(?:\((.*)\))?\s*$`)

// unreleasedVersion returns the version the changelog's Unreleased
// heading names, "" when it names none.
func unreleasedVersion(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		m := unreleasedRE.FindStringSubmatch(strings.TrimSpace(sc.Text()))
		if m == nil {
			continue
		}
		v := strings.TrimSpace(m[1])
		if v != "" && (!semver.IsValid(v) || semver.Canonical(v) != v || semver.Prerelease(v) != "") {
			return "", fmt.Errorf("%w: %q is not a release version such as v0.2.0", ErrChangelog, v)
		}
		return v, nil
	}
	return "", sc.Err()
}

// newest returns the newest version under dir, "" when there is none.
func newest(dir string) (string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	best := ""
	for _, e := range entries {
		if e.IsDir() && semver.IsValid(e.Name()) && semver.Canonical(e.Name()) == e.Name() && (best == "" || semver.Compare(e.Name(), best) > 0) {
			best = e.Name()
		}
	}
	return best, nil
}

// run runs apidiff with args in the module's directory.
func run(ctx context.Context, o Options, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, o.Apidiff[0], append(o.Apidiff[1:len(o.Apidiff):len(o.Apidiff)], args...)...)
	cmd.Dir = o.Dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("apicompat: apidiff %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// modulePath returns the module path in dir/go.mod.
func modulePath(dir string) (string, error) {
	data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "module" {
			return strings.Trim(f[1], `"`), nil
		}
	}
	return "", fmt.Errorf("apicompat: %s/go.mod names no module", dir)
}

// relPath returns pkg's path inside the module mod.
func relPath(mod, pkg string) string {
	if pkg == mod {
		return "."
	}
	return strings.TrimPrefix(pkg, mod+"/")
}

// rel returns path relative to dir, for messages.
func rel(dir, path string) string {
	if r, err := filepath.Rel(dir, path); err == nil {
		return r
	}
	return path
}

// indent indents every line of s.
func indent(s string) string {
	return "    " + strings.ReplaceAll(s, "\n", "\n    ")
}
