package main

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/lambda-dedupe/dedupe/infra"
	"github.com/lambda-dedupe/dedupe/internal/maketest"
)

// TestMakeRunInstallsNoSystemPackage checks, with `make -n run`, that the
// Quick start's `make run` would run no package manager: only `make test`
// may install system packages (issue 18).
func TestMakeRunInstallsNoSystemPackage(t *testing.T) {
	out := maketest.DryRun(t, "run")
	managers := regexp.MustCompile(`(?m)\b(apt-get|apt|dpkg|yum|dnf|apk|brew|pip3?|sudo)\s`)
	if m := managers.FindString(out); m != "" {
		t.Errorf("make -n run runs %q, want no package manager:\n%s", m, out)
	}
}

// TestMakeRunSmoke is the Quick start's `make run` in a short form: the
// real target, which builds the functions, the emulator and this command
// with its progress lines, then starts the whole stack on a dynalite of
// its own, sends the quick start's payment twice (-smoke), wants the
// replay, and stops. A `make run` that fails to build or to answer fails
// here.
func TestMakeRunSmoke(t *testing.T) {
	needDynalite(t)
	if _, err := exec.LookPath("make"); err != nil {
		t.Skipf("make not found: %v", err)
	}
	root, err := infra.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("make", "-C", root, "run", "RUN_ARGS=-port 0 -smoke -reaper-interval 0")
	// A make of its own, as a user's: not the sub-make of make test, and
	// on a dynalite it starts.
	for _, kv := range os.Environ() {
		switch name, _, _ := strings.Cut(kv, "="); name {
		case "MAKEFLAGS", "MFLAGS", "MAKELEVEL", "AWS_ENDPOINT_URL_DYNAMODB":
		default:
			cmd.Env = append(cmd.Env, kv)
		}
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make run -smoke: %v\n%s", err, out)
	}
	for _, want := range []string{
		"make run: the first build compiles the AWS SDK",
		"make run: building the api function",
		"make run: building the local stack",
		"dedupe local stack is up",
		"smoke: POST /payments 201, then 201 with Idempotent-Replayed: true",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("make run's output has no %q:\n%s", want, out)
		}
	}
}
