package gateway

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/lambda-dedupe/dedupe/infra"
)

// Built by TestMain for the tests that run real processes.
var (
	testRIE  string // the emulator, cached under build/bin at the module root
	testEcho string // testdata/echofn built as a bootstrap
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	flag.Parse()
	if testing.Short() {
		return m.Run()
	}
	// The builds have no deadline of their own: on a busy machine they
	// take what they take, and go test's -timeout bounds the whole run.
	ctx := context.Background()
	root, err := infra.ModuleRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	testRIE = filepath.Join(root, "build", "bin", "aws-lambda-rie")
	if _, err := BuildRIE(ctx, root, testRIE); err != nil {
		fmt.Fprintln(os.Stderr, "build the emulator:", err)
		return 1
	}
	dir, err := os.MkdirTemp("", "gateway-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	testEcho = filepath.Join(dir, "echofn", "bootstrap")
	if err := BuildStaticBootstrap(ctx, root, "./localtest/gateway/testdata/echofn", testEcho); err != nil {
		fmt.Fprintln(os.Stderr, "build echofn:", err)
		return 1
	}
	return m.Run()
}

// needProcesses skips tests that run real processes under -short.
func needProcesses(t *testing.T) {
	t.Helper()
	if testRIE == "" {
		t.Skip("-short: no emulator built")
	}
}
