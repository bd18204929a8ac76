package dedupe_test

import (
	"os"
	"testing"
)

// TestMain runs the package's tests as inside Lambda, where
// AWS_LAMBDA_FUNCTION_NAME names the key prefix of a guard built with the
// zero Config. Tests of the refusal outside Lambda unset it with
// t.Setenv.
func TestMain(m *testing.M) {
	if os.Getenv("AWS_LAMBDA_FUNCTION_NAME") == "" {
		os.Setenv("AWS_LAMBDA_FUNCTION_NAME", "dedupe-test")
	}
	os.Exit(m.Run())
}
