package cli_test

import (
	"strings"
	"testing"
)

// TestHostileArguments: what the operator typed, or pasted from a log, is
// as hostile as a stored string. The flag package quotes a bad flag and a
// bad value in its own messages; nothing reaches the terminal raw.
func TestHostileArguments(t *testing.T) {
	const evil = "\x1b[2J\x1b]0;owned\x07\u202e"
	for _, args := range [][]string{
		{"show", "--bo" + evil + "gus"},
		{"show", "--limit", "1" + evil},
		{"inflight", "--shards", evil},
		{"show" + evil},
		{"release", "key:" + evil, "--token", "x", "--table", "t"},
	} {
		_, out, errOut := run(t, "", args...)
		for _, s := range []string{out, errOut} {
			if strings.ContainsAny(s, "\x1b\x07\u202e") {
				t.Errorf("%q printed a raw control character: %q", args, s)
			}
		}
	}
}
