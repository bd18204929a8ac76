package rehearsal_test

import (
	"testing"

	"github.com/lambda-dedupe/dedupe/infra"
	"github.com/lambda-dedupe/dedupe/localtest/rehearsal"
)

// The whole rehearsal runs in localtest/cmd/rehearse's TestRehearse,
// through the command `make deploy-rehearsal` runs.

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
