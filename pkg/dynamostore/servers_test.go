package dynamostore_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"slices"
	"testing"

	"github.com/lambda-dedupe/dedupe/localtest/dynamoserver"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/dynamostore"
)

// TestReplayCallsByServer pins the cost of a replay on each server by name
// (dynamoserver.ServerKind), where TestCallsPerRequest accepts either: on
// moto, which returns the item with the failed condition as DynamoDB does,
// a replay is exactly one PutItem; on dynalite, which ignores
// ReturnValuesOnConditionCheckFailure, it is the PutItem and the fallback
// GetItem. On any other endpoint both are accepted and the count is logged.
func TestReplayCallsByServer(t *testing.T) {
	r := newRig(t)
	s := r.store(t, dynamostore.Options{})
	g := dedupe.New(s, &dedupe.Config{Prefix: "servers", Now: (&clock{now: base}).Now})
	ctx := context.Background()
	want := dedupe.Result{StatusCode: 201, Body: []byte(`{"id":"pay_1"}`)}
	key := "replay-" + rand.Text()
	if _, err := g.Do(ctx, dedupe.Call{Key: key, Fingerprint: "fp"}, func(context.Context) (dedupe.Result, error) { return want, nil }); err != nil {
		t.Fatal(err)
	}

	const replays = 5
	r.calls.reset()
	for range replays {
		out, err := g.Do(ctx, dedupe.Call{Key: key, Fingerprint: "fp"}, func(context.Context) (dedupe.Result, error) {
			t.Error("a replay ran the function")
			return dedupe.Result{}, nil
		})
		if err != nil || !out.Replayed || !bytes.Equal(out.Result.Body, want.Body) {
			t.Fatalf("replay = %+v, %v; want the stored result", out, err)
		}
	}
	ops, withoutItem := r.calls.snapshot()
	oneCall := slices.Repeat([]string{"UpdateItem"}, replays)
	twoCalls := slices.Repeat([]string{"UpdateItem", "GetItem"}, replays)
	server := dynamoserver.ServerKind()
	t.Logf("%s: %d calls for %d replays (%v)", server, len(ops), replays, ops)
	switch returns, known := dynamoserver.ReturnsOldItemOnConditionFailure(); {
	case known && returns:
		if !slices.Equal(ops, oneCall) || withoutItem != 0 {
			t.Errorf("%s returns ALL_OLD: got calls %v (%d failures without the item), want exactly 1 UpdateItem (the claim) per replay", server, ops, withoutItem)
		}
	case known:
		if !slices.Equal(ops, twoCalls) || withoutItem != replays {
			t.Errorf("%s ignores ALL_OLD: got calls %v (%d failures without the item), want UpdateItem (the claim) then GetItem per replay", server, ops, withoutItem)
		}
	default:
		if !slices.Equal(ops, oneCall) && !slices.Equal(ops, twoCalls) {
			t.Errorf("got calls %v, want 1 or 2 per replay", ops)
		}
	}
}
