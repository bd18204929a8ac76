// Command mutate is `make mutate`: it runs mutation testing
// (github.com/go-gremlins/gremlins, a go tool dependency of the module)
// over one package's own tests and writes a report for it.
//
// Usage:
//
//	go run ./localtest/cmd/mutate [-out build/mutate] [-files F.go,G.go]
//		[-recheck REPORT.json] [-workers N] [-timeout-coefficient N]
//		[-equivalent FILE] [-v] PKG
//
// PKG is a package directory, such as ./pkg/dedupe. Only the package's own
// non-test files are mutated, never those of the packages below it (each
// of them is a package of its own: `make mutate PKG=./pkg/dedupe/dedupetest`);
// -files narrows them further to the files it names, such as
// guard.go,cache.go (gremlins itself only excludes). Every mutant is tested
// with `go test` of PKG alone, so the figures measure the package's own
// tests. gremlins runs on a snapshot of the module's sources (without
// build/, node_modules and .git), so that files edited while it runs do
// not end up in its mutants. The servers those tests need come from the
// environment:
// `make mutate` runs this command under withdynalite and withservers, as
// `make test` runs the tests, so that no store test is skipped.
//
// It writes, for PKG ./pkg/dedupe, into -out:
//
//   - pkg-dedupe.json, gremlins' machine-readable report (every mutant,
//     its position, mutator and status);
//   - pkg-dedupe.log, gremlins' output;
//   - pkg-dedupe.txt, the summary: one line with the counts, efficacy
//     (killed / (killed + lived)) and mutator coverage ((killed + lived) /
//     (killed + lived + not covered)), then every survivor.
//
// and prints the summary. A survivor listed in the -equivalent file
// (docs/mutants/equivalent.md) is marked as such; the file's entries for
// PKG that did not survive are printed as possibly stale, with the
// status they got, so that the list is kept true. Check such an entry by
// hand before removing it: gremlins counts any failing `go test` as a
// kill, and has reported kills of mutants that pass every test when
// applied by hand. Each entry is one line, a Markdown list item: a dash,
// the mutant's position from the module root in backquotes
// (pkg/dedupe/cache.go:57:14), its mutator (CONDITIONALS_BOUNDARY), a
// colon and the reason no behaviour can tell it apart.
//
// With -recheck REPORT.json it runs no gremlins: it tests again, by hand,
// the LIVED and NOT COVERED mutants of that report (of the -files, when
// given), each applied to a snapshot of the module, and writes
// pkg-dedupe.recheck.json and .txt; see docs/development.md for what
// each status then means. A mutant whose position no longer holds the
// operator its mutator changes is listed as MOVED, never counted.
//
// The exit code is 0 when gremlins (or the recheck) ran, whatever the
// figures; 1 when it could not run, wrote no report, or a recheck found
// a mutant MOVED; 2 for bad usage.
package main
