// Package maketest is for tests that hold a make target to the command a
// doc shows it running: [DryRun] prints what `make -n` would run from the
// module's root, so a test can check that `make bench` still runs
// ./localtest/cmd/bench, and a doc that names the target stays true.
package maketest
