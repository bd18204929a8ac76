package goflavour_test

import (
	"os"
	"os/exec"

	"github.com/lambda-dedupe/dedupe/internal/goflavour"
)

// A test builds a helper program as it was itself built, so that the
// packages it needs come from Go's build cache.
func ExampleOwn() {
	own := goflavour.Own()
	cmd := exec.Command("go", append(append([]string{"build"}, own.Args()...), "-o", os.DevNull, "./cmd/helper")...)
	cmd.Env = append(os.Environ(), own.Env()...)
	_ = cmd.Run()
}
