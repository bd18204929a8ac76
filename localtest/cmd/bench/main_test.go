package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/lambda-dedupe/dedupe/internal/maketest"
)

// TestShort runs the whole bench at a few requests per scenario (the
// -short scale), so that a bench that panics or fails (a guard it builds
// wrongly, a stack that answers errors) fails `make test` rather than a
// user's `make bench`. It needs what `make bench` needs: dynalite (from
// AWS_ENDPOINT_URL_DYNAMODB, or the one it starts), the emulator's build,
// and moto_server for one line (reported, not required).
func TestShort(t *testing.T) {
	var out bytes.Buffer
	if err := run(t.Context(), t.TempDir(), short1, &out); err != nil {
		t.Fatalf("bench -short: %v\n%s", err, out.String())
	}
	t.Log("\n" + out.String())
	for _, want := range []string{
		"In process, HTTP API adapter over memstore",
		"guarded fresh",
		"Waited duplicates",
		"Duplicates that wait",
		"Through the local stack",
		"DynamoDB capacity units per request",
		"New's global-table check",
		"wrote ",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the report has no %q", want)
		}
	}
}

// TestMakeBenchRunsThisCommand: `make bench` runs this command, whose
// run TestShort exercises.
func TestMakeBenchRunsThisCommand(t *testing.T) {
	out := maketest.DryRun(t, "bench")
	if !strings.Contains(out, "go run ./localtest/cmd/bench ") {
		t.Errorf("make -n bench does not run ./localtest/cmd/bench:\n%s", out)
	}
}
