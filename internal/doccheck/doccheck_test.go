package doccheck

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lambda-dedupe/dedupe/infra"
	"github.com/lambda-dedupe/dedupe/internal/goflavour"
)

// block is one fenced block of a Markdown file.
type block struct {
	file string // relative to the module root
	line int    // of the opening fence
	lang string // the fence's info string, e.g. "go"
	code string // dedented by the fence's indentation
}

// goBlocks returns the ```go blocks of the Markdown file at path.
func goBlocks(root, rel string) ([]block, error) {
	return blocks(root, rel, "go")
}

// blocks returns the fenced blocks of language lang of the Markdown file
// rel under root. A block inside a list item (its fence indented) is
// dedented by its fence's indentation.
func blocks(root, rel, lang string) ([]block, error) {
	data, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		return nil, err
	}
	var out []block
	var cur *block
	var indent string
	var buf strings.Builder
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		switch {
		case cur == nil && strings.HasPrefix(trimmed, "```"+lang) && strings.TrimSpace(strings.TrimPrefix(trimmed, "```"+lang)) == "":
			cur = &block{file: rel, line: n, lang: lang}
			indent = line[:len(line)-len(strings.TrimLeft(line, " "))]
			buf.Reset()
		case cur != nil && trimmed == "```":
			cur.code = buf.String()
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			buf.WriteString(strings.TrimPrefix(line, indent))
			buf.WriteByte('\n')
		}
	}
	if cur != nil {
		return nil, fmt.Errorf("%s:%d: unterminated ```%s block", rel, cur.line, lang)
	}
	return out, sc.Err()
}

// docFiles returns README.md and docs/*.md, relative to root.
func docFiles(t *testing.T, root string) []string {
	t.Helper()
	files := []string{"README.md"}
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pages {
		rel, _ := filepath.Rel(root, p)
		files = append(files, rel)
	}
	return files
}

// TestDocsCompile writes every ```go block of README.md and docs/*.md into
// a package of its own inside the module and runs go vet on them all: each
// must be a complete file that compiles against the module's packages, so
// the docs cannot drift from the API.
func TestDocsCompile(t *testing.T) {
	root, err := infra.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	files := docFiles(t, root)
	// A directory whose name starts with "_" is inside the module, so the
	// blocks import its packages, but no ./... pattern matches it.
	dir, err := os.MkdirTemp(root, "_doccheck-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	where := map[string]block{}
	count := 0
	for _, f := range files {
		blocks, err := goBlocks(root, f)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range blocks {
			if !strings.HasPrefix(strings.TrimSpace(stripComments(b.code)), "package ") {
				t.Errorf("%s:%d: a ```go block must be a complete Go file starting with its package clause (use ```text for fragments)", b.file, b.line)
				continue
			}
			count++
			name := fmt.Sprintf("b%03d", count)
			if err := os.Mkdir(filepath.Join(dir, name), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, name, "doc.go"), []byte(b.code), 0o644); err != nil {
				t.Fatal(err)
			}
			where[name] = b
		}
	}
	if count == 0 {
		t.Fatal("no ```go blocks found: the README's example at least should be one")
	}
	// Vetted in this test binary's flavour (-race, -trimpath under make
	// test), so that the packages the blocks import are the ones go test
	// compiled, found in Go's build cache.
	own := goflavour.Own()
	args := append([]string{"vet"}, own.Args()...)
	for i := 1; i <= count; i++ {
		args = append(args, fmt.Sprintf("./%s/b%03d", filepath.Base(dir), i))
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), own.Env()...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		// Name each failure by its Markdown file and line.
		msg := string(out)
		for name, b := range where {
			msg = strings.ReplaceAll(msg, filepath.Base(dir)+"/"+name+"/doc.go", fmt.Sprintf("%s (block at line %d)", b.file, b.line))
		}
		t.Fatalf("go vet of the docs' %d Go blocks: %v\n%s", count, err, msg)
	}
	t.Logf("%d Go blocks of %d Markdown files compile", count, len(files))
}

// stripComments drops leading // comment lines, so a block may open with
// a comment before its package clause.
func stripComments(code string) string {
	lines := strings.Split(code, "\n")
	for len(lines) > 0 && (strings.HasPrefix(strings.TrimSpace(lines[0]), "//") || strings.TrimSpace(lines[0]) == "") {
		lines = lines[1:]
	}
	return strings.Join(lines, "\n")
}

// TestGoBlocks checks the extraction itself.
func TestGoBlocks(t *testing.T) {
	dir := t.TempDir()
	md := "text\n```go\npackage a\n```\n```text\nno\n```\n  ```go\npackage b\n  ```\n```gopher\nx\n```\n"
	if err := os.WriteFile(filepath.Join(dir, "x.md"), []byte(md), 0o644); err != nil {
		t.Fatal(err)
	}
	blocks, err := goBlocks(dir, "x.md")
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) != 2 || blocks[0].code != "package a\n" || blocks[0].line != 2 || blocks[1].code != "package b\n" {
		t.Errorf("got %+v, want the two go blocks", blocks)
	}
}
