package ensuretest_test

import (
	"path/filepath"
	"testing"

	"github.com/lambda-dedupe/dedupe/infra"
)

// templatePath is the project's template, relative to this package.
var templatePath = filepath.Join("..", "..", "..", "template.yaml")

func load(t *testing.T, opts *infra.Options) *infra.Template {
	t.Helper()
	tpl, err := infra.LoadWithOptions(templatePath, opts)
	if err != nil {
		t.Fatalf("load %s: %v", templatePath, err)
	}
	return tpl
}
