// Package capacity provides Meter, a dynamostore.Client that computes the
// DynamoDB capacity units every call it passes on would consume, by AWS's
// documented rules, from the items actually written: `make bench` reports
// them per fresh request, replay, failure and retry (Measure, beside
// Powertools' idempotency utility, modelled by its calls), since no local server
// (dynalite, moto) reports consumed capacity or counts index writes.
//
// The rules (docs/cost.md quotes them):
//
//   - an item's size is the sum of its attribute names and values
//     (dynamostore.ItemSize);
//   - a write consumes one unit per started KB of the larger of the item
//     before and after it; a conditional write whose condition fails
//     consumes one unit per started KB of the larger of the existing item
//     and the item it would have written, at least 1, and the existing
//     item it returns (ReturnValuesOnConditionCheckFailure) costs no read;
//   - a strongly consistent read consumes one unit per started 4 KB of the
//     item read, at least 1 (0.5 when eventually consistent);
//   - a write that puts an item into a global secondary index, or removes
//     it, costs one more write of the index entry's size; one that changes
//     the entry's index key costs two; one that changes only projected
//     attributes costs one.
//
// A Meter reads the item before (and, for an update, after) each write
// through the client it wraps, uncounted: it is for measuring one request
// at a time, not for production traffic.
package capacity
