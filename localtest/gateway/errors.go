package gateway

import (
	"errors"
	"fmt"
)

// Errors returned by this package. Check them with errors.Is; returned
// errors wrap them with details.
var (
	// ErrThrottled means every execution environment of the function was
	// busy, the pool was at its concurrency limit and no environment became
	// free within the pool's queue timeout. The gateway answers 429, as
	// Lambda throttling does.
	ErrThrottled = errors.New("gateway: function throttled: all execution environments busy")

	// ErrClosed means the pool was closed.
	ErrClosed = errors.New("gateway: pool closed")

	// ErrStart means an execution environment could not be started: the
	// emulator or the bootstrap is missing, or the emulator did not listen
	// in time.
	ErrStart = errors.New("gateway: cannot start execution environment")

	// ErrRoute means a route key is not of the form "METHOD /path" or
	// "$default", or is declared twice.
	ErrRoute = errors.New("gateway: invalid route")
)

// Error types a FunctionError carries besides those the function reports.
const (
	// ErrorTypeTimeout is the FunctionError type of an invocation that ran
	// past the function's timeout. Lambda reports it as Sandbox.Timedout.
	ErrorTypeTimeout = "Sandbox.Timedout"

	// ErrorTypeExit is the FunctionError type of an invocation whose
	// runtime process exited before it answered.
	ErrorTypeExit = "Runtime.ExitError"

	// ErrorTypeEnvironment is the FunctionError type of an invocation that
	// failed because the emulator itself failed: it exited or answered
	// something unexpected.
	ErrorTypeEnvironment = "Local.EnvironmentError"
)

// FunctionError is the error [Pool.Invoke] returns when an invocation ran
// but the function produced no result: the handler returned an error or
// panicked, the runtime crashed, or the invocation timed out. Lambda calls
// these function errors (X-Amz-Function-Error: Unhandled); API Gateway
// answers them with 500.
type FunctionError struct {
	// Function is the function's name.
	Function string

	// Type is the error type: the errorType the runtime reported (for a Go
	// handler error, the Go type of the error, such as "errorString"), or
	// one of ErrorTypeTimeout, ErrorTypeExit and ErrorTypeEnvironment.
	Type string

	// Message is the error message the runtime or the emulator reported.
	Message string
}

// Error implements error.
func (e *FunctionError) Error() string {
	return fmt.Sprintf("gateway: function %s failed: %s: %s", e.Function, e.Type, e.Message)
}

// Timeout reports whether the invocation ran past the function's timeout.
func (e *FunctionError) Timeout() bool {
	return e.Type == ErrorTypeTimeout
}
