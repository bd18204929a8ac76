package dynamoserver

import "os"

// EnvSelect is the environment variable a user sets to choose the DynamoDB
// server the tests of `make test` run on: "dynalite" or "moto" (each started
// for the run on a loopback port), or the URL of any endpoint (DynamoDB
// Local, a real DynamoDB). localtest/cmd/withdynalite reads it; unset, make
// test runs the suite on dynalite and the DynamoDB packages again on moto.
const EnvSelect = "DEDUPE_DYNAMODB"

// EnvServer is the environment variable through which
// localtest/cmd/withdynalite tells the tests which server
// AWS_ENDPOINT_URL_DYNAMODB is: one of the [Server] values. Tests read it
// with [ServerKind] to expect a documented difference between servers by
// name, never by probing.
const EnvServer = "DEDUPE_DYNAMODB_SERVER"

// Server names a DynamoDB implementation the tests know the behaviour of.
type Server string

// The servers [ServerKind] reports.
const (
	// Dynalite ignores ReturnValuesOnConditionCheckFailure and has no TTL
	// API.
	Dynalite Server = "dynalite"
	// Moto honours ReturnValuesOnConditionCheckFailure (ALL_OLD) and has
	// the TTL API, as DynamoDB does.
	Moto Server = "moto"
	// Endpoint is any other endpoint (DynamoDB Local, a real table): the
	// tests accept every behaviour DynamoDB documents.
	Endpoint Server = "endpoint"
)

// ServerKind returns the server the test endpoint is, from EnvServer:
// [Dynalite], [Moto], or [Endpoint] when the variable is empty or names
// something else (an endpoint the user set by hand).
func ServerKind() Server {
	switch s := Server(os.Getenv(EnvServer)); s {
	case Dynalite, Moto:
		return s
	default:
		return Endpoint
	}
}

// ReturnsOldItemOnConditionFailure reports whether the test server is known
// to return the existing item with a failed condition
// (ReturnValuesOnConditionCheckFailure ALL_OLD), as DynamoDB does: true on
// moto, false on dynalite. ok is false for an unknown endpoint, whose
// behaviour the tests must not assume.
func ReturnsOldItemOnConditionFailure() (returns, ok bool) { return onMotoOnly() }

// HasTTLAPI reports whether the test server is known to have the TTL API
// (DescribeTimeToLive, UpdateTimeToLive): true on moto, false on dynalite.
// ok is false for an unknown endpoint.
func HasTTLAPI() (has, ok bool) { return onMotoOnly() }

// onMotoOnly answers for a DynamoDB behaviour that moto has and dynalite
// lacks: whether the test server has it, and whether that is known.
func onMotoOnly() (has, known bool) {
	switch ServerKind() {
	case Moto:
		return true, true
	case Dynalite:
		return false, true
	default:
		return false, false
	}
}
