package cli

// Escape exposes esc to the tests.
var Escape = esc

// EscapeJSON exposes escJSON to the tests.
var EscapeJSON = escJSON

// Unescape exposes unesc to the tests.
var Unescape = unesc
