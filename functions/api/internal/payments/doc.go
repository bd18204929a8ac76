// Package payments provides the payments demo API behind functions/api: a
// small, realistic HTTP API whose side effects (charges) end-to-end tests
// can count.
//
// Routes, on an API Gateway HTTP API (payload format 2.0):
//
//	POST /payments       charge a card; an Idempotency-Key is required
//	GET  /payments/{id}  one of the caller's payments
//	GET  /payments       the caller's payments, paginated (?limit=, ?next=)
//
// Every route is behind the template's AWS_IAM authorizer: idempotency
// keys and payments are scoped by the caller's IAM identity (OwnerOf), so
// a caller never sees or replays another's payments. A request without a
// caller identity is refused with 500.
//
// Field names in the body are case-sensitive and appear once: "AMOUNT"
// or a second "amount" is a 400, because encoding/json would take the
// last of them while a check in front of the API reads the first.
//
// POST /payments takes {"amount": <positive integer, minor units>,
// "currency": "<3 letters>", "source": "<test token>"} and charges it
// through SimulatedProcessor, whose test tokens exercise every path of
// dedupe:
//
//	tok_visa            succeeds: 201, payment "succeeded"
//	tok_chargeDeclined  declined: 402, payment "declined" (stored, replayed)
//	tok_processorError  processor failure: 502, nothing written (key released)
//	tok_slow            succeeds after 3 s (a duplicate waits, then gets 409 or the replay)
//	tok_panic           the handler panics (key released, client sees 500)
//	tok_timeout         never answers: the invocation times out, the record
//	                    stays in flight until its lease runs out
//
// A payment is written to the payments table once the processor has
// answered: with status "succeeded", or "declined" for a decline, as a
// real processor records declined charges too. GET /payments therefore
// lists both; count the "succeeded" ones to know what was charged.
// Nothing is written for a processor failure, a panic or a timeout.
//
// A payment that was not recorded is never answered 201. If the payments
// table fails, the answer is 503 with Retry-After, which releases the
// idempotency key; the retry charges under the same processor key
// (dedupe.Claim.DownstreamKey, which names this request's life), which the
// processor answers with the first charge, so nothing is charged twice,
// and writes the same row, whose ID comes from that key too. If the table
// refuses the row because another payment holds its ID, the answer is 500
// (ProblemNotRecorded) and the conflict is logged at ERROR.
package payments
