package moto

import "errors"

// Errors returned by [Start] and the [Server] methods. Check them with
// errors.Is; the returned errors wrap them with details.
var (
	// ErrNotInstalled means the moto_server executable was not found.
	// Install it with `pip install 'moto[server]'`.
	ErrNotInstalled = errors.New("moto: not installed")

	// ErrNotReady means moto_server did not answer a DynamoDB ListTables
	// request before the start timeout, or exited while starting.
	ErrNotReady = errors.New("moto: not ready")

	// ErrExited means moto_server exited without being stopped.
	ErrExited = errors.New("moto: exited unexpectedly")
)
