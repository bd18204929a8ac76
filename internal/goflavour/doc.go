// Package goflavour reads how the running program was built, as the go
// build settings that change how every package is compiled: -race,
// -trimpath and CGO_ENABLED.
//
// A test that builds another Go program for this machine (a Lambda
// bootstrap to run under the emulator, a command to run as a subprocess)
// builds it in the test binary's own flavour, so that go build finds every
// package it needs already compiled in Go's build cache, for the test
// itself. Built in another flavour, the same packages are compiled a
// second time: with empty caches, that was most of a minute of `make test`.
package goflavour
