package maketest

import (
	"os/exec"
	"testing"

	"github.com/lambda-dedupe/dedupe/infra"
)

// DryRun returns what `make -n` with args (a target, then variables such
// as REF=v0) prints, run in the module's root. It skips t when make is
// not on the PATH, and fails it when make refuses the target or the
// root cannot be found.
func DryRun(t testing.TB, args ...string) string {
	t.Helper()
	if _, err := exec.LookPath("make"); err != nil {
		t.Skipf("make not found: %v", err)
	}
	root, err := infra.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("make", append([]string{"-n", "-C", root}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("make -n %v: %v\n%s", args, err, out)
	}
	return string(out)
}
