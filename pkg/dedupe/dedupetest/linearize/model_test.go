package linearize

import (
	"math"
	"testing"

	"github.com/anishathalye/porcupine"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
)

// op builds an operation on key "k" over [call, ret].
func op(client int, call, ret int64, in Input, out Output) porcupine.Operation {
	in.Key, in.Client = "k", client
	return porcupine.Operation{ClientId: client, Input: in, Output: out, Call: call, Return: ret}
}

// The test's times: second 1000, in milliseconds.
const t0 = 1_000_000

func claimIn(fp, tok string, now int64) Input {
	return Input{Kind: Claim, Fingerprint: fp, Token: tok, NowMs: now, LeaseMs: now + 500, ExpSec: (now + 5000) / 1000}
}

// held is the record claimIn(fp, tok, now) writes on a free key.
func held(fp, tok string, now int64) State {
	in := claimIn(fp, tok, now)
	return State{Present: true, Status: dedupe.StatusInProgress, Fingerprint: fp, Token: tok, FirstToken: tok,
		LeaseMs: in.LeaseMs, ExpSec: in.ExpSec, CreatedMs: now, UpdatedMs: now}
}

func TestModel(t *testing.T) {
	a, b := held("fp", "a", t0), held("fp", "b", t0)
	inf := int64(math.MaxInt64)
	for _, tt := range []struct {
		name string
		ops  []porcupine.Operation
		want porcupine.CheckResult
	}{
		{"one claim acquires", []porcupine.Operation{
			op(0, 0, 10, claimIn("fp", "a", t0), Output{Acquired: true, Record: a}),
			op(1, 0, 10, claimIn("fp", "b", t0), Output{Record: a}),
		}, porcupine.Ok},
		{"two concurrent claims both acquire", []porcupine.Operation{
			op(0, 0, 10, claimIn("fp", "a", t0), Output{Acquired: true, Record: a}),
			op(1, 0, 10, claimIn("fp", "b", t0), Output{Acquired: true, Record: b}),
		}, porcupine.Illegal},
		{"a stale owner's Complete succeeds", []porcupine.Operation{
			op(0, 0, 10, claimIn("fp", "a", t0), Output{Acquired: true, Record: a}),
			op(1, 20, 30, Input{Kind: Complete, Token: "b", NowMs: t0, ExpSec: 2000}, Output{}),
		}, porcupine.Illegal},
		{"a stranger's Release succeeds", []porcupine.Operation{
			op(0, 0, 10, claimIn("fp", "a", t0), Output{Acquired: true, Record: a}),
			op(1, 20, 30, Input{Kind: Release, Token: "b"}, Output{}),
		}, porcupine.Illegal},
		{"another request takes over a stranded key", []porcupine.Operation{
			op(0, 0, 10, claimIn("fp", "a", t0), Output{Acquired: true, Record: a}),
			op(1, 20, 30, claimIn("other", "b", t0+1000), Output{Acquired: true, Record: held("other", "b", t0+1000)}),
		}, porcupine.Illegal},
		{"the same request takes over a stranded key, in the same life", []porcupine.Operation{
			op(0, 0, 10, claimIn("fp", "a", t0), Output{Acquired: true, Record: a}),
			op(1, 20, 30, claimIn("fp", "b", t0+1000), Output{Acquired: true, Record: func() State {
				s := held("fp", "b", t0+1000)
				s.FirstToken = "a"
				return s
			}()}),
		}, porcupine.Ok},
		{"a claim of unknown outcome took effect", []porcupine.Operation{
			op(0, 0, inf, claimIn("fp", "a", t0), Output{Outcome: Unknown}),
			op(1, 20, 30, Input{Kind: Get, NowMs: t0}, Output{Record: a}),
		}, porcupine.Ok},
		{"a claim of unknown outcome did not", []porcupine.Operation{
			op(0, 0, inf, claimIn("fp", "a", t0), Output{Outcome: Unknown}),
			op(1, 20, 30, Input{Kind: Get, NowMs: t0}, Output{Outcome: NotFound}),
		}, porcupine.Ok},
		{"a record read before its write was sent", []porcupine.Operation{
			op(1, 0, 10, Input{Kind: Get, NowMs: t0}, Output{Record: a}),
			op(0, 20, inf, claimIn("fp", "a", t0), Output{Outcome: Unknown}),
		}, porcupine.Illegal},
		{"an expired record vanishes, then a call with an earlier Now finds the key free", []porcupine.Operation{
			op(0, 0, 10, claimIn("fp", "a", t0), Output{Acquired: true, Record: a}),
			op(1, 20, 30, Input{Kind: Get, NowMs: t0 + 7000}, Output{Outcome: NotFound}),
			op(2, 40, 50, claimIn("other", "b", t0+100), Output{Acquired: true, Record: held("other", "b", t0+100)}),
		}, porcupine.Ok},
		{"a live record vanishes", []porcupine.Operation{
			op(0, 0, 10, claimIn("fp", "a", t0), Output{Acquired: true, Record: a}),
			op(1, 20, 30, Input{Kind: Get, NowMs: t0 + 100}, Output{Outcome: NotFound}),
		}, porcupine.Illegal},
		{"a claim answered with a zero record where the key is free", []porcupine.Operation{
			op(0, 0, 10, claimIn("fp", "a", t0), Output{Acquired: true, Record: a}),
			op(1, 20, 30, claimIn("fp", "b", t0+1000), Output{}),
		}, porcupine.Ok},
		{"a claim answered with a zero record where the key is held", []porcupine.Operation{
			op(0, 0, 10, claimIn("fp", "a", t0), Output{Acquired: true, Record: a}),
			op(1, 20, 30, claimIn("fp", "b", t0+100), Output{}),
		}, porcupine.Illegal},
		{"an empty FirstToken is accepted", []porcupine.Operation{
			op(0, 0, 10, claimIn("fp", "a", t0), Output{Acquired: true, Record: func() State { s := a; s.FirstToken = ""; return s }()}),
		}, porcupine.Ok},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := porcupine.CheckOperationsTimeout(Model(false), tt.ops, 0); got != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
		})
	}
}

func TestModelStrictFirstToken(t *testing.T) {
	a := held("fp", "a", t0)
	a.FirstToken = ""
	ops := []porcupine.Operation{op(0, 0, 10, claimIn("fp", "a", t0), Output{Acquired: true, Record: a})}
	if got := porcupine.CheckOperationsTimeout(Model(true), ops, 0); got != porcupine.Illegal {
		t.Errorf("a record without FirstToken under StrictFirstToken: got %s, want Illegal", got)
	}
}
