// Package gateway provides a local stand-in for Amazon API Gateway HTTP APIs
// and for the Lambda execution environments behind them, so that the
// project's real function binaries can be run and tested on one machine.
//
// A [Pool] runs one function's bootstrap binary under the AWS Lambda Runtime
// Interface Emulator (aws-lambda-rie). One emulator process is one execution
// environment and serves one invocation at a time, as in Lambda: the pool
// reuses a warm idle environment, starts a new one when all are busy (up to
// a concurrency limit, then throttles), and replaces an environment whose
// invocation timed out or whose runtime crashed.
//
// A [Gateway] is an http.Handler that serves route keys such as
// "POST /payments" or "GET /payments/{id}" the way an HTTP API with payload
// format 2.0 does: it builds the event (raw path and query, lower-cased
// headers with repeated values joined by ",", cookies, path and query
// parameters, request context, base64 unless the body is text/* or
// application/json, the route's authorizer), invokes the function and maps its
// result back to an HTTP response, including API Gateway's inference rules
// for results that are not a response object and its canned error answers
// (404, 413, 429, 431, 500, 503). It enforces API Gateway's limits on the
// body (10 MB) and on the request line and header values (10240 bytes),
// and Lambda's 6 MB invocation payload on the event and the response,
// answering them as AWS does without disturbing an execution environment.
//
// Each route carries the authorizer its template declares ([Auth]), and the
// gateway is no kinder than AWS: an AWS_IAM route refuses a request without
// a SigV4 Authorization header (403) and passes the caller's identity in
// requestContext.authorizer.iam; a JWT route refuses one without a bearer
// token (401) and passes its claims in requestContext.authorizer.jwt; a
// route without an authorizer passes neither, whatever the request
// carries. Signatures are checked for their form, never verified: it is a
// local tool, never an authentication boundary.
//
// Processes: each environment is an emulator process in its own process
// group; the emulator starts the bootstrap in a group of its own. A Pool
// starts, per environment, one goroutine that waits for the process and
// copies its output; [Pool.Close] stops every environment and waits for
// those goroutines, so nothing is left running.
package gateway
