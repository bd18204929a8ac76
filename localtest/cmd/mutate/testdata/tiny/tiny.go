// Package tiny is the fixture of mutate's tests: of its four mutants, its
// test kills one, one survives (an equivalent one, listed in
// ../equivalent.md) and two are in code no test runs.
package tiny

// Max returns the larger of a and b.
func Max(a, b int) int {
	// Negated (a <= b) it returns the smaller: the test kills it. At the
	// boundary (a >= b) it returns a when they are equal, the same value.
	if a > b {
		return a
	}
	return b
}

// Positive reports whether a is positive. No test calls it.
func Positive(a int) bool { return a > 0 }
