package gateway

import (
	"bytes"
	"context"
	"debug/buildinfo"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/lambda-dedupe/dedupe/internal/goflavour"
)

// RIEModule and RIEPackage name the Runtime Interface Emulator: the module
// go.mod requires and the command it declares as a tool.
const (
	RIEModule  = "github.com/aws/aws-lambda-runtime-interface-emulator"
	RIEPackage = RIEModule + "/cmd/aws-lambda-rie"
)

// BuildRIE builds the emulator with the go command into out, from the
// module in root at the version its go.mod requires, unless out already
// holds that version. It returns whether it built.
func BuildRIE(ctx context.Context, root, out string) (built bool, err error) {
	want, err := goCmd(ctx, root, nil, "list", "-m", "-f", "{{.Version}}", RIEModule)
	if err != nil {
		return false, err
	}
	if info, err := buildinfo.ReadFile(out); err == nil {
		// The command's own module is the binary's main module.
		if info.Main.Path == RIEModule && info.Main.Version == want {
			return false, nil
		}
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return false, err
	}
	// Build beside out, then rename: a concurrent user never sees half a
	// binary.
	// Always static and without -race, as `make rie` builds it: the
	// emulator is not under test, and built with -race it made the gateway
	// tests 2.4 times slower.
	tmp := out + ".tmp" + fmt.Sprint(os.Getpid())
	if _, err := goCmd(ctx, root, hostEnv("CGO_ENABLED=0"), "build", "-trimpath", "-o", tmp, RIEPackage); err != nil {
		return false, err
	}
	return true, os.Rename(tmp, out)
}

// BuildBootstrap builds the main package pkg (an import path or a
// ./relative path inside root) into out as a Lambda bootstrap for the
// local operating system and architecture, with -tags lambda.norpc, in
// the flavour of the running program (see [goflavour.Own]): a bootstrap
// that the end-to-end tests build is compiled with -race, like the tests,
// from the packages they already compiled; one that `make run` builds is
// static, like the command.
func BuildBootstrap(ctx context.Context, root, pkg, out string) error {
	own := goflavour.Own()
	args := append(append([]string{"build", "-tags", "lambda.norpc"}, own.Args()...), "-o", out, pkg)
	_, err := goCmd(ctx, root, hostEnv(own.Env()...), args...)
	return err
}

// BuildStaticBootstrap builds the main package pkg (an import path or a
// ./relative path inside root) into out as a Lambda bootstrap for the
// local operating system and architecture, with -tags lambda.norpc,
// static and without paths whatever the running program's flavour, as
// `make rie` builds the emulator. It is for test functions that are
// scaffolding rather than code under test (the gateway's echofn): the
// tests start dozens of them, and on the project's 2-core machine a
// race-built echofn took some 0.2 s of CPU to start and a static one 0.04
// s. It compiles only the function's own packages beyond the standard
// library, which the emulator's build has compiled in this flavour.
func BuildStaticBootstrap(ctx context.Context, root, pkg, out string) error {
	_, err := goCmd(ctx, root, hostEnv("CGO_ENABLED=0"), "build", "-tags", "lambda.norpc", "-trimpath", "-o", out, pkg)
	return err
}

// hostEnv is the environment for go build that targets this machine, even
// if the caller's environment cross-compiles, with settings added last.
func hostEnv(settings ...string) []string {
	return append(append(os.Environ(), "GOOS="+runtime.GOOS, "GOARCH="+runtime.GOARCH), settings...)
}

// goCmd runs the go command in dir and returns its trimmed output.
func goCmd(ctx context.Context, dir string, env []string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			// Killed because the caller gave up, not a build failure.
			return "", fmt.Errorf("go %s: %w", strings.Join(args, " "), context.Cause(ctx))
		}
		return "", fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, stderr.Bytes())
	}
	return strings.TrimSpace(stdout.String()), nil
}
