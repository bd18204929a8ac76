package rehearsal

import (
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"time"
)

// ErrCheckFailed means at least one check of the rehearsal failed; the
// [Report] lists them.
var ErrCheckFailed = errors.New("rehearsal: check failed")

// Check is one comparison of what the stack created with what the
// template declares.
type Check struct {
	// Step is the rehearsal step: build, create, update or delete.
	Step string
	// What names the property checked, e.g. "IdempotencyTable key schema".
	What string
	// Got and Want are the values compared, formatted.
	Got, Want string
	// OK reports whether they matched.
	OK bool
}

// Gap is a declared property that moto does not model: the value it
// returned is its known stand-in, not the declared one. A real account
// must confirm it.
type Gap struct {
	// Step and What are as in Check.
	Step, What string
	// Want is what the template declares; Got is moto's stand-in.
	Want, Got string
	// Why says what moto does instead.
	Why string
}

// Report is what a rehearsal checked and found, with how long each step
// took.
type Report struct {
	StackName string
	Checks    []Check
	Gaps      []Gap
	// Copied describes what `sam build` would copy without build in
	// source: the files under the functions' CodeUri.
	Copied string
	// Durations of the steps, by name: build, transform, create, update,
	// delete.
	Durations map[string]time.Duration
	// step is the step that checks are recorded for.
	step string
}

// Failed returns the checks that failed.
func (r *Report) Failed() []Check {
	var out []Check
	for _, c := range r.Checks {
		if !c.OK {
			out = append(out, c)
		}
	}
	return out
}

// Write prints the report: one line per check and gap, then the
// durations.
func (r *Report) Write(w io.Writer) {
	for _, c := range r.Checks {
		mark := "ok  "
		if !c.OK {
			mark = "FAIL"
		}
		fmt.Fprintf(w, "%s %-7s %s: %s", mark, c.Step, c.What, c.Got)
		if !c.OK {
			fmt.Fprintf(w, " (want %s)", c.Want)
		}
		fmt.Fprintln(w)
	}
	for _, g := range r.Gaps {
		fmt.Fprintf(w, "GAP  %-7s %s: moto %s (declared %s): %s\n", g.Step, g.What, g.Got, g.Want, g.Why)
	}
	if r.Copied != "" {
		fmt.Fprintf(w, "note build   without build_in_source, sam build would copy %s\n", r.Copied)
	}
	var parts []string
	for _, s := range []string{"build", "transform", "create", "update", "delete"} {
		if d, ok := r.Durations[s]; ok {
			parts = append(parts, fmt.Sprintf("%s %v", s, d.Round(time.Millisecond)))
		}
	}
	fmt.Fprintf(w, "%d checks, %d failed, %d moto gaps; %s\n", len(r.Checks), len(r.Failed()), len(r.Gaps), strings.Join(parts, ", "))
}

// eq records a check that got equals want.
func (r *Report) eq(what string, got, want any) bool {
	ok := reflect.DeepEqual(got, want)
	r.Checks = append(r.Checks, Check{Step: r.step, What: what, Got: fmt.Sprint(got), Want: fmt.Sprint(want), OK: ok})
	return ok
}

// that records a check of a condition, described by got.
func (r *Report) that(what string, ok bool, got, want string) bool {
	r.Checks = append(r.Checks, Check{Step: r.step, What: what, Got: got, Want: want, OK: ok})
	return ok
}

// gapOr records a check that got equals want, or, when got is moto's
// known stand-in for the property, a Gap saying why.
func (r *Report) gapOr(what string, got, want, stand any, why string) {
	if !reflect.DeepEqual(got, want) && reflect.DeepEqual(got, stand) {
		r.Gaps = append(r.Gaps, Gap{Step: r.step, What: what, Want: fmt.Sprint(want), Got: fmt.Sprint(got), Why: why})
		return
	}
	r.eq(what, got, want)
}

// fail records a failed check for an error.
func (r *Report) fail(what string, err error) {
	r.Checks = append(r.Checks, Check{Step: r.step, What: what, Got: "error: " + err.Error(), Want: "no error"})
}
