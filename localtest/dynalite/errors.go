package dynalite

import "errors"

// Errors returned by [Start] and the [Server] methods. Check them with
// errors.Is; the returned errors wrap them with details.
var (
	// ErrNotInstalled means the dynalite executable, or the node program
	// that runs it, was not found. Run `make deps` or
	// `npm ci --prefix localtest` to install dynalite.
	ErrNotInstalled = errors.New("dynalite: not installed")

	// ErrNotReady means dynalite did not answer a ListTables request before
	// the start timeout, or exited while starting.
	ErrNotReady = errors.New("dynalite: not ready")

	// ErrExited means dynalite exited without being stopped.
	ErrExited = errors.New("dynalite: exited unexpectedly")
)
