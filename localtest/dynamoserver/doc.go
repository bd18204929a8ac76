// Package dynamoserver names the DynamoDB servers the tests run on, and
// how a test learns which one it has: the environment variables
// localtest/cmd/withdynalite reads and sets, and the documented
// differences between dynalite, moto and DynamoDB.
//
// It imports only the standard library, so that withdynalite, which
// carries moto's traffic through its proxy, is built static and without
// the race detector from the packages the emulator also needs.
package dynamoserver
