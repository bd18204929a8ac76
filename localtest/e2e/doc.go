// Package e2e provides the end-to-end tests of the project: the real
// function binaries (functions/api, functions/reaper) built for this machine
// and run under the Lambda Runtime Interface Emulator, behind the local API
// Gateway of localtest/gateway, against dynalite, with tables created from
// template.yaml. The tests start the whole stack themselves in TestMain
// and stop it when they end; they need dynalite installed (`npm ci --prefix
// localtest`), and are skipped without it unless CI is set.
//
// TestALBTarget runs examples/alb-payments the same way, invoked with ALB
// events directly, its signing key served by a local stand-in for ALB's
// key endpoint.
//
// The package holds only tests.
package e2e
