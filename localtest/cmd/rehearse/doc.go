// Command rehearse runs the deploy rehearsal (package
// localtest/rehearsal): `make deploy-rehearsal` runs it.
//
// Usage:
//
//	go run ./localtest/cmd/rehearse [-endpoint URL] [-keep DIR] [-v]
//
// Without -endpoint it starts moto_server on a free loopback port for the
// run and stops it afterwards; with it, it uses that (throwaway) moto. It
// builds the functions as sam build would, uploads, transforms, creates,
// updates and deletes the stack, and prints one line per check and per
// property moto does not model (GAP). -keep keeps the artifacts and the
// packaged template in DIR. -v copies moto_server's request log to
// standard error.
//
// It exits 0 when every check passed, 1 when one failed or a step could
// not be carried out, 2 on a usage error and 3 when moto_server,
// cfn-lint or aws-sam-translator is not installed.
package main
