package rehearsal_test

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/lambda-dedupe/dedupe/infra"
	"github.com/lambda-dedupe/dedupe/localtest/moto"
	"github.com/lambda-dedupe/dedupe/localtest/rehearsal"
)

// TestRehearsal runs the whole deploy rehearsal against a moto_server of
// its own. It needs moto_server, cfn-lint and aws-sam-translator: without
// them it skips, and fails when CI is set.
func TestRehearsal(t *testing.T) {
	// No deadline of its own: on a busy machine the builds and moto take
	// what they take; go test's -timeout catches a hang.
	ctx := t.Context()
	need := func(err error) {
		t.Helper()
		if err == nil {
			return
		}
		if os.Getenv("CI") != "" {
			t.Fatalf("required in CI: %v", err)
		}
		t.Skip(err)
	}
	need(infra.Tools(ctx))
	srv, err := moto.Start(ctx, moto.Options{})
	if errors.Is(err, moto.ErrNotInstalled) {
		need(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Stop(); err != nil {
			t.Errorf("stop moto_server: %v", err)
		}
	})
	report, err := rehearsal.Run(ctx, rehearsal.Options{Endpoint: srv.Endpoint(), WorkDir: t.TempDir()})
	if report != nil {
		var b strings.Builder
		report.Write(&b)
		t.Log("\n" + b.String())
	}
	if err != nil {
		t.Fatal(err)
	}
}

func TestLoadSAMConfig(t *testing.T) {
	root, err := infra.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := rehearsal.LoadSAMConfig(root + "/samconfig.toml")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.StackName != "dedupe" || !cfg.BuildInSource || cfg.S3Prefix != "dedupe" || len(cfg.Capabilities) != 1 || cfg.Capabilities[0] != "CAPABILITY_IAM" {
		t.Errorf("got %+v, want stack dedupe, build in source, prefix dedupe, CAPABILITY_IAM", cfg)
	}
}
