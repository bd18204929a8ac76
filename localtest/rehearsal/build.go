package rehearsal

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"debug/elf"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/lambda-dedupe/dedupe/infra"
)

// Artifact is one function's built and zipped code.
type Artifact struct {
	// LogicalID is the function's logical id.
	LogicalID string
	// Zip is the zip file's content.
	Zip []byte
	// SHA256 is the base64 SHA-256 of Zip: Lambda's CodeSha256.
	SHA256 string
	// MD5 is the hex MD5 of Zip: the S3 key `sam package` gives it.
	MD5 string
}

// sourceTree describes what `sam build` would copy for a function without
// build_in_source: every file under its CodeUri.
type sourceTree struct {
	files int
	bytes int64
	// nodeModules is how many of those files are under a node_modules
	// directory.
	nodeModules int
}

// walkSource measures the tree at dir, skipping .git (SAM skips it) and
// .aws-sam (its own output).
func walkSource(dir string) (sourceTree, error) {
	var t sourceTree
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == ".aws-sam") {
			return filepath.SkipDir
		}
		if !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		t.files++
		t.bytes += info.Size()
		if strings.Contains(path, string(filepath.Separator)+"node_modules"+string(filepath.Separator)) {
			t.nodeModules++
		}
		return nil
	})
	if err != nil {
		return sourceTree{}, fmt.Errorf("measure %s: %w", dir, err)
	}
	return t, nil
}

// build builds fn as `sam build` does for BuildMethod makefile: it runs
// `make build-<LogicalId>` with ARTIFACTS_DIR set to a fresh directory
// under work, in the CodeUri directory (build in source; without it SAM
// runs the same target in a scratch copy of that directory), then zips the
// artifacts directory.
func build(ctx context.Context, root, work string, fn infra.Function) (Artifact, error) {
	if fn.BuildMethod != "makefile" {
		return Artifact{}, fmt.Errorf("build %s: BuildMethod %q: the rehearsal builds makefile functions only", fn.LogicalID, fn.BuildMethod)
	}
	src := filepath.Join(root, fn.CodeURI)
	if _, err := os.Stat(filepath.Join(src, "Makefile")); err != nil {
		return Artifact{}, fmt.Errorf("build %s: SAM needs a Makefile in CodeUri %q: %w", fn.LogicalID, fn.CodeURI, err)
	}
	artifacts := filepath.Join(work, fn.LogicalID)
	if err := os.MkdirAll(artifacts, 0o755); err != nil {
		return Artifact{}, fmt.Errorf("build %s: %w", fn.LogicalID, err)
	}
	cmd := exec.CommandContext(ctx, "make", "--makefile", filepath.Join(src, "Makefile"), "build-"+fn.LogicalID)
	cmd.Dir = src
	// As SAM runs it: afresh, with ARTIFACTS_DIR in the environment; an
	// enclosing make's flags (make test) must not leak in.
	cmd.Env = infra.MakeBuildEnv(os.Environ(), artifacts)
	if out, err := cmd.CombinedOutput(); err != nil {
		return Artifact{}, fmt.Errorf("build %s: make build-%s: %w\n%s", fn.LogicalID, fn.LogicalID, err, out)
	}
	zipped, err := zipDir(artifacts)
	if err != nil {
		return Artifact{}, fmt.Errorf("build %s: %w", fn.LogicalID, err)
	}
	sum := sha256.Sum256(zipped)
	m := md5.Sum(zipped)
	return Artifact{
		LogicalID: fn.LogicalID,
		Zip:       zipped,
		SHA256:    base64.StdEncoding.EncodeToString(sum[:]),
		MD5:       hex.EncodeToString(m[:]),
	}, nil
}

// zipDir zips the files under dir, keeping their permission bits, as SAM
// does (Lambda runs bootstrap only if it is executable). It deflates at
// flate.BestSpeed: the level is not a property of the deploy, and under
// make test's -race the default level spent some 6 s of CPU per 17 MB
// bootstrap, against under 2 s at BestSpeed (about 10% larger).
func zipDir(dir string) ([]byte, error) {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	zw.RegisterCompressor(zip.Deflate, func(w io.Writer) (io.WriteCloser, error) {
		return flate.NewWriter(w, flate.BestSpeed)
	})
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		h, err := zip.FileInfoHeader(info)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		h.Name = filepath.ToSlash(rel)
		h.Method = zip.Deflate
		w, err := zw.CreateHeader(h)
		if err != nil {
			return err
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(w, f)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("zip %s: %w", dir, err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("zip %s: %w", dir, err)
	}
	return buf.Bytes(), nil
}

// inspectZip checks that a function zip holds exactly one file, an
// executable bootstrap that is a static ELF binary for arch ("arm64" or
// "x86_64"), and describes it.
func inspectZip(z []byte, arch string) (string, error) {
	zr, err := zip.NewReader(bytes.NewReader(z), int64(len(z)))
	if err != nil {
		return "", fmt.Errorf("read zip: %w", err)
	}
	var names []string
	for _, f := range zr.File {
		names = append(names, f.Name)
	}
	if !slices.Equal(names, []string{"bootstrap"}) {
		return "", fmt.Errorf("zip holds %v, want bootstrap only", names)
	}
	f := zr.File[0]
	if f.Mode().Perm()&0o111 == 0 {
		return "", fmt.Errorf("bootstrap mode %v: not executable", f.Mode())
	}
	rc, err := f.Open()
	if err != nil {
		return "", fmt.Errorf("open bootstrap: %w", err)
	}
	defer rc.Close()
	bin, err := io.ReadAll(rc)
	if err != nil {
		return "", fmt.Errorf("read bootstrap: %w", err)
	}
	ef, err := elf.NewFile(bytes.NewReader(bin))
	if err != nil {
		return "", fmt.Errorf("bootstrap is not an ELF binary: %w", err)
	}
	defer ef.Close()
	want := map[string]elf.Machine{"arm64": elf.EM_AARCH64, "x86_64": elf.EM_X86_64}[arch]
	if ef.Machine != want {
		return "", fmt.Errorf("bootstrap is for %v, want %s (%v)", ef.Machine, arch, want)
	}
	for _, p := range ef.Progs {
		if p.Type == elf.PT_INTERP {
			return "", fmt.Errorf("bootstrap is dynamically linked; provided.al2023 needs a static binary (CGO_ENABLED=0)")
		}
	}
	return fmt.Sprintf("bootstrap %s, %d bytes (%d zipped), static %v, mode %v", ef.Machine, len(bin), len(z), ef.Class, f.Mode().Perm()), nil
}
