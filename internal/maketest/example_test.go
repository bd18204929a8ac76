package maketest_test

import (
	"strings"
	"testing"

	"github.com/lambda-dedupe/dedupe/internal/maketest"
)

// TestDryRunPrintsTheRecipe: `make -n vet` prints go vet's command line,
// and runs nothing.
func TestDryRunPrintsTheRecipe(t *testing.T) {
	if out := maketest.DryRun(t, "vet"); !strings.Contains(out, "go vet ./...") {
		t.Errorf("make -n vet printed %q, want its go vet command", out)
	}
}
