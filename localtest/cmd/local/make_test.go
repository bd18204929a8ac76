package main

import (
	"os/exec"
	"regexp"
	"testing"

	"github.com/lambda-dedupe/dedupe/infra"
)

// TestMakeRunInstallsNoSystemPackage checks, with `make -n run`, that the
// Quick start's `make run` would run no package manager: only `make test`
// may install system packages (issue 18).
func TestMakeRunInstallsNoSystemPackage(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skipf("make not found: %v", err)
	}
	root, err := infra.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("make", "-n", "-C", root, "run")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make -n run: %v\n%s", err, out)
	}
	managers := regexp.MustCompile(`(?m)\b(apt-get|apt|dpkg|yum|dnf|apk|brew|pip3?|sudo)\s`)
	if m := managers.Find(out); m != nil {
		t.Errorf("make -n run runs %q, want no package manager:\n%s", m, out)
	}
}
