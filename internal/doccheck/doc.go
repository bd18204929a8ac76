// Package doccheck provides the test that keeps the documentation's Go
// code compiling: every ```go block of README.md and docs/*.md must be a
// complete Go file (package clause and imports) that builds against this
// module. It has no API; its test is the check.
package doccheck
