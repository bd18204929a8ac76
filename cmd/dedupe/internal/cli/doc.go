// Package cli implements the dedupe command (cmd/dedupe): parsing,
// opening the store named by flags or environment, the subcommands and
// their human and JSON output. Run is the whole command, so tests drive
// it as a user would, with arguments, streams and an environment.
package cli
