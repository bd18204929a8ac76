package dedupe

import (
	"errors"
	"strings"
	"testing"
)

// TestHandleTurnsAPanicIntoAnError: a function handler that panics on
// arguments JMESPath does not check fails the evaluation with an error
// that names the function and quotes no argument.
func TestHandleTurnsAPanicIntoAnError(t *testing.T) {
	_, err := handle("find_first", func([]any) (any, error) { panic("slice bounds out of range [:7] with length 3") }, []any{"secret"})
	var ee *evalError
	if !errors.As(err, &ee) || !strings.Contains(err.Error(), "find_first()") || strings.Contains(err.Error(), "secret") || strings.Contains(err.Error(), "range") {
		t.Errorf("handle of a panicking handler: %v, want an evalError naming find_first and nothing of the panic or the arguments", err)
	}
	if res, err := handle("abs", func(args []any) (any, error) { return args[0], nil }, []any{1.0}); err != nil || res != 1.0 {
		t.Errorf("handle of a handler that returns: %v, %v", res, err)
	}
}
