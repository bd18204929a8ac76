// Package payments provides the payments demo API behind functions/api: a
// small, realistic HTTP API whose side effects (charges) end-to-end tests
// can count.
//
// Routes, on an API Gateway HTTP API (payload format 2.0):
//
//	POST /payments       charge a card; an Idempotency-Key is required
//	GET  /payments/{id}  one payment
//	GET  /payments       every payment, paginated (?limit=, ?next=)
//
// POST /payments takes {"amount": <positive integer, minor units>,
// "currency": "<3 letters>", "source": "<test token>"} and charges it
// through SimulatedProcessor, whose test tokens exercise every path of
// dedupe:
//
//	tok_visa            succeeds: 201, payment "succeeded"
//	tok_chargeDeclined  declined: 402, payment "declined" (stored, replayed)
//	tok_processorError  processor failure: 502, nothing written (key released)
//	tok_slow            succeeds after 3 s (watch a duplicate get 409)
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
// If the payments table fails after the card was charged, the charge is
// still answered 201 (and stored for replay by dedupe), and the missing
// row is logged at ERROR with everything needed to reconcile it: a 5xx
// would release the idempotency key and let the client's retry charge the
// card again. A decline that cannot be recorded charged nothing, so it is
// answered 503 with Retry-After and its retry runs again.
package payments
