package doccheck

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"github.com/lambda-dedupe/dedupe/infra"
)

// slug is GitHub's anchor for a heading: lower case, punctuation other
// than "-" and "_" dropped, spaces as "-".
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// headings returns the anchors and the texts of the Markdown file's
// headings (outside fenced blocks).
func headings(t *testing.T, path string) (anchors, texts map[string]bool) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	anchors, texts = map[string]bool{}, map[string]bool{}
	fenced := false
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		text := strings.TrimSpace(strings.TrimLeft(line, "#"))
		texts[text] = true
		anchors[slug(text)] = true
	}
	return anchors, texts
}

// TestDocLinks: every relative link of README.md and docs/*.md names a
// file that exists and, with a #fragment, one of its headings.
func TestDocLinks(t *testing.T) {
	root, err := infra.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	for _, f := range docFiles(t, root) {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(string(b), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, frag, _ := strings.Cut(target, "#")
			path := filepath.Join(root, f)
			if file != "" {
				path = filepath.Join(filepath.Dir(path), file)
			}
			if _, err := os.Stat(path); err != nil {
				t.Errorf("%s: link %s: no file %s", f, target, file)
				continue
			}
			if frag == "" || !strings.HasSuffix(path, ".md") {
				continue
			}
			if anchors, _ := headings(t, path); !anchors[frag] {
				t.Errorf("%s: link %s: %s has no heading #%s", f, target, filepath.Base(path), frag)
			}
		}
	}
}

// TestCodeDocReferences: what the Go code's comments point readers to
// exists: every docs/<page>.md, every heading they quote after it
// (docs/http.md, "The key's scope"), and no section of the README, which
// holds a short example and the index of the docs only.
func TestCodeDocReferences(t *testing.T) {
	root, err := infra.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("git", "-C", root, "ls-files", "*.go").Output()
	if err != nil {
		t.Skipf("git ls-files: %v", err)
	}
	page := regexp.MustCompile(`docs/([a-z0-9-]+\.md)(, "([^"]+)")?`)
	readme := regexp.MustCompile(`README's [A-Z"]`)
	for _, f := range strings.Fields(string(out)) {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			continue // deleted in the work tree
		}
		for _, line := range strings.Split(string(b), "\n") {
			c := strings.TrimSpace(line)
			if !strings.HasPrefix(c, "//") {
				continue
			}
			if readme.MatchString(c) {
				t.Errorf("%s: %q points to a README section: name the docs page", f, c)
			}
			for _, m := range page.FindAllStringSubmatch(c, -1) {
				path := filepath.Join(root, "docs", m[1])
				if _, err := os.Stat(path); err != nil {
					t.Errorf("%s: %q: no docs/%s", f, c, m[1])
					continue
				}
				if m[3] != "" {
					if _, texts := headings(t, path); !texts[m[3]] {
						t.Errorf("%s: %q: docs/%s has no heading %q", f, c, m[1], m[3])
					}
				}
			}
		}
	}
}
