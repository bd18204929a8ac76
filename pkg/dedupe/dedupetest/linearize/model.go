package linearize

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
)

// Kind is a Store method.
type Kind uint8

// The methods a history calls.
const (
	Claim Kind = iota
	Get
	Complete
	Release
	Extend
)

// String returns the method's name.
func (k Kind) String() string {
	return [...]string{"Claim", "Get", "Complete", "Release", "Extend"}[k]
}

// Input is one call as the model sees it: every time in it is already at
// the precision stores compare (milliseconds, and seconds for expiry).
type Input struct {
	Kind   Kind
	Key    string
	Client int
	// Fingerprint is a Claim's.
	Fingerprint string
	// Token is the caller's owner token (every method but Get).
	Token string
	// NowMs is the request's Now in epoch milliseconds (not Release).
	NowMs int64
	// LeaseMs is a Claim's or Extend's LeaseUntil, epoch milliseconds.
	LeaseMs int64
	// ExpSec is the ExpiresAt of a Claim, Complete or Extend, epoch
	// seconds.
	ExpSec int64
	// Result is a Complete's result, and Omit its OmitResult.
	Result Result
	Omit   bool

	reused bool // a Claim's token was claimed before (statistics only)
}

func (in Input) nowSec() int64 { return time.UnixMilli(in.NowMs).Unix() }

// Result is a stored result in comparable form.
type Result struct {
	Status  int
	Headers string // canonical encoding, see encodeHeaders
	Body    string
}

// State is the model's record for one key: memstore's record, at the
// precision stores keep. The zero State is an absent key.
type State struct {
	Present     bool
	Status      dedupe.Status
	Fingerprint string
	Token       string
	FirstToken  string
	LeaseMs     int64
	ExpSec      int64
	CreatedMs   int64
	UpdatedMs   int64
	HasResult   bool
	Result      Result
	Omitted     bool
}

func (s State) expired(in Input) bool { return s.Present && s.ExpSec < in.nowSec() }

func (s State) life() string {
	if s.FirstToken != "" {
		return s.FirstToken
	}
	return s.Token
}

// freeFor is dedupe.Record.FreeFor on the model's record.
func (s State) freeFor(in Input) bool {
	switch {
	case !s.Present || s.expired(in):
		return true
	case s.Status != dedupe.StatusInProgress:
		return false
	case in.Token != "" && s.Token == in.Token:
		return true
	}
	return s.LeaseMs < in.NowMs && s.Fingerprint == in.Fingerprint
}

// Outcome classifies what a call returned.
type Outcome uint8

// The outcomes of a call.
const (
	// OK: nil error.
	OK Outcome = iota
	// LeaseLost: an error wrapping dedupe.ErrLeaseLost.
	LeaseLost
	// NotFound: an error wrapping dedupe.ErrNotFound.
	NotFound
	// Unknown: any other error, or an attempt whose reply was lost: the
	// call may or may not have taken effect.
	Unknown
)

// Output is what one call returned, in comparable form.
type Output struct {
	Outcome  Outcome
	Acquired bool
	// Record is a Claim's or Get's record (Present false when zero).
	Record State
}

// apply is the specification: the output memstore gives for in on the
// record pre, and the record after.
func apply(pre State, in Input) (Output, State) {
	switch in.Kind {
	case Claim:
		if !pre.freeFor(in) {
			return Output{Record: pre}, pre
		}
		first := in.Token
		if pre.Present && !pre.expired(in) {
			first = pre.life()
		}
		post := State{Present: true, Status: dedupe.StatusInProgress, Fingerprint: in.Fingerprint, Token: in.Token,
			FirstToken: first, LeaseMs: in.LeaseMs, ExpSec: in.ExpSec, CreatedMs: in.NowMs, UpdatedMs: in.NowMs}
		return Output{Acquired: true, Record: post}, post
	case Get:
		if !pre.Present || pre.expired(in) {
			return Output{Outcome: NotFound}, pre
		}
		return Output{Record: pre}, pre
	case Complete:
		if !pre.Present || pre.Token != in.Token || pre.expired(in) {
			return Output{Outcome: LeaseLost}, pre
		}
		post := pre
		post.Status = dedupe.StatusCompleted
		post.HasResult, post.Result, post.Omitted = !in.Omit, in.Result, in.Omit
		if in.Omit {
			post.Result = Result{}
		}
		post.ExpSec, post.UpdatedMs = in.ExpSec, in.NowMs
		return Output{}, post
	case Release:
		if !pre.Present || pre.Token != in.Token || pre.Status != dedupe.StatusInProgress {
			return Output{Outcome: LeaseLost}, pre
		}
		post := pre
		post.LeaseMs = 0
		return Output{}, post
	case Extend:
		if !pre.Present || pre.Token != in.Token || pre.Status != dedupe.StatusInProgress || pre.expired(in) || pre.LeaseMs < in.NowMs {
			return Output{Outcome: LeaseLost}, pre
		}
		post := pre
		post.LeaseMs, post.ExpSec, post.UpdatedMs = in.LeaseMs, in.ExpSec, in.NowMs
		return Output{}, post
	}
	panic(fmt.Sprintf("linearize: unknown kind %d", in.Kind))
}

// matches reports whether got, a store's answer, is the answer want the
// specification gives. FirstToken is compared when the store returned
// one, or always with strictFirst; a completed record's lease is not
// compared (stores may drop it once the work is done).
func matches(want, got Output, kind Kind, strictFirst bool) bool {
	if want.Outcome != got.Outcome || want.Acquired != got.Acquired {
		return false
	}
	if want.Outcome != OK || (kind != Claim && kind != Get) {
		return true
	}
	w, g := want.Record, got.Record
	if w.Present != g.Present {
		return false
	}
	if (strictFirst || g.FirstToken != "") && g.FirstToken != w.FirstToken {
		return false
	}
	if w.Status == dedupe.StatusCompleted {
		g.LeaseMs = w.LeaseMs
	}
	if w.Omitted && g.Omitted && g.Result.Headers == "" && g.Result.Body == "" {
		// The status code may be kept with an omitted result.
		g.HasResult, g.Result = false, Result{}
	}
	g.FirstToken = w.FirstToken
	return w == g
}

// vanished reports whether out is the contract's rare race on pre: a
// Claim whose write failed on a record that vanished, or became free for
// it, before the store read it back, answered with Acquired false and a
// zero Record ("the caller may claim again"). It changed nothing, and
// is allowed only where the key is free for the claim: the moment of the
// read-back.
func vanished(pre State, in Input, out Output) bool {
	return in.Kind == Claim && out.Outcome == OK && !out.Acquired && !out.Record.Present && pre.freeFor(in)
}

// Model returns the porcupine model of a dedupe.Store: memstore's
// semantics per key. An expired record may vanish at any call whose Now
// is past its expiry (memstore's Get drops it, DynamoDB's TTL and Redis's
// expiry delete it), so the model is nondeterministic there, and in calls
// whose outcome is unknown, which may or may not have taken effect. With
// strictFirst every record a store returns must carry the FirstToken the
// model gives it; otherwise an empty FirstToken (a record written by a
// store that does not keep it yet) is accepted.
func Model(strictFirst bool) porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Partition: partitionByKey,
		Init:      func() []any { return []any{State{}} },
		Step: func(state, input, output any) []any {
			pre, in, out := state.(State), input.(Input), output.(Output)
			candidates := []State{pre}
			if in.Kind != Release && pre.expired(in) {
				candidates = append(candidates, State{})
			}
			var next []any
			add := func(s State) {
				if !slices.Contains(next, any(s)) {
					next = append(next, s)
				}
			}
			for _, c := range candidates {
				want, post := apply(c, in)
				switch {
				case out.Outcome == Unknown:
					add(c)
					add(post)
				case matches(want, out, in.Kind, strictFirst):
					add(post)
				case vanished(c, in, out):
					add(c)
				}
			}
			return next
		},
		DescribeOperation: func(input, output any) string {
			return describeOp(input.(Input), output.(Output))
		},
		DescribeState: func(state any) string { return describeState(state.(State)) },
	}
	return nm.ToModel()
}

// partitionByKey splits a history into one per key: keys are independent.
func partitionByKey(history []porcupine.Operation) [][]porcupine.Operation {
	byKey := map[string][]porcupine.Operation{}
	for _, op := range history {
		k := op.Input.(Input).Key
		byKey[k] = append(byKey[k], op)
	}
	var out [][]porcupine.Operation
	for _, k := range slices.Sorted(maps.Keys(byKey)) {
		out = append(out, byKey[k])
	}
	return out
}

func describeOp(in Input, out Output) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s(", in.Kind)
	switch in.Kind {
	case Claim:
		fmt.Fprintf(&b, "fp=%s tok=%s now=%d lease=%d exp=%d", in.Fingerprint, in.Token, in.NowMs, in.LeaseMs, in.ExpSec)
	case Get:
		fmt.Fprintf(&b, "now=%d", in.NowMs)
	case Complete:
		fmt.Fprintf(&b, "tok=%s now=%d exp=%d omit=%t body=%s", in.Token, in.NowMs, in.ExpSec, in.Omit, in.Result.Body)
	case Release:
		fmt.Fprintf(&b, "tok=%s", in.Token)
	case Extend:
		fmt.Fprintf(&b, "tok=%s now=%d lease=%d exp=%d", in.Token, in.NowMs, in.LeaseMs, in.ExpSec)
	}
	b.WriteString(") -> ")
	switch out.Outcome {
	case LeaseLost:
		b.WriteString("ErrLeaseLost")
	case NotFound:
		b.WriteString("ErrNotFound")
	case Unknown:
		b.WriteString("unknown")
	default:
		if in.Kind == Claim {
			fmt.Fprintf(&b, "acquired=%t ", out.Acquired)
		}
		if in.Kind == Claim || in.Kind == Get {
			b.WriteString(describeState(out.Record))
		} else {
			b.WriteString("ok")
		}
	}
	return b.String()
}

func describeState(s State) string {
	if !s.Present {
		return "absent"
	}
	res := ""
	switch {
	case s.Omitted:
		res = " omitted"
	case s.HasResult:
		res = fmt.Sprintf(" result=%d/%s", s.Result.Status, s.Result.Body)
	}
	return fmt.Sprintf("{%s fp=%s tok=%s first=%s lease=%d exp=%d created=%d updated=%d%s}",
		s.Status, s.Fingerprint, s.Token, s.FirstToken, s.LeaseMs, s.ExpSec, s.CreatedMs, s.UpdatedMs, res)
}

// observe converts a record a store returned.
func observe(r dedupe.Record) State {
	if r.Status == "" && r.Token == "" && r.Fingerprint == "" {
		return State{}
	}
	s := State{
		Present: true, Status: r.Status, Fingerprint: r.Fingerprint, Token: r.Token, FirstToken: r.FirstToken,
		LeaseMs: millis(r.LeaseExpiresAt), ExpSec: seconds(r.ExpiresAt),
		CreatedMs: millis(r.CreatedAt), UpdatedMs: millis(r.UpdatedAt), Omitted: r.ResultOmitted,
	}
	if r.Result != nil {
		s.HasResult = true
		s.Result = Result{Status: r.Result.StatusCode, Headers: encodeHeaders(r.Result.Headers), Body: string(r.Result.Body)}
	}
	return s
}

func millis(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func seconds(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.Unix()
}

// encodeHeaders encodes headers canonically: names sorted, values in
// order.
func encodeHeaders(h map[string][]string) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(h)) {
		fmt.Fprintf(&b, "%q:%q;", k, h[k])
	}
	return b.String()
}
