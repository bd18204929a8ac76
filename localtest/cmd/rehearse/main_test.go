package main

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/lambda-dedupe/dedupe/internal/maketest"
)

// TestRehearse is `make deploy-rehearsal`, through this command's run: the
// whole rehearsal against a moto_server it starts, which must pass (exit
// 0) with its report on standard output. Without moto_server, cfn-lint or
// aws-sam-translator (exit 3) it skips, and fails when CI is set.
func TestRehearse(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(nil, &stdout, &stderr)
	if code == 3 {
		if os.Getenv("CI") != "" {
			t.Fatalf("required in CI: %s", stderr.String())
		}
		t.Skip(strings.TrimSpace(stderr.String()))
	}
	t.Log("\n" + stdout.String())
	if code != 0 {
		t.Fatalf("rehearse exited %d:\n%s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), " checks, 0 failed, ") {
		t.Errorf("the report has no summary of 0 failed checks:\n%s", stdout.String())
	}
}

// TestMakeDeployRehearsalRunsThisCommand: `make deploy-rehearsal` runs
// this command, whose run TestRehearse exercises.
func TestMakeDeployRehearsalRunsThisCommand(t *testing.T) {
	out := maketest.DryRun(t, "deploy-rehearsal")
	if !strings.Contains(out, "go run ./localtest/cmd/rehearse") {
		t.Errorf("make -n deploy-rehearsal does not run ./localtest/cmd/rehearse:\n%s", out)
	}
}
