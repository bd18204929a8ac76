package cli

// Escape exposes esc to the tests.
var Escape = esc
