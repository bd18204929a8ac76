package main

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lambda-dedupe/dedupe/functions/api/internal/payments"
)

// TestSlowTokenDocumented holds docs/getting-started.md's row on
// tok_slow to the demo: the charge takes payments.DefaultSlowLatency, and
// a duplicate waits duplicateWait (Config.Wait), so only one sent within
// the difference gets 409.
func TestSlowTokenDocumented(t *testing.T) {
	page, err := os.ReadFile("../../docs/getting-started.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("\\| `tok_slow` \\| takes (\\d+) seconds \\| yes; a retry meanwhile waits up to (\\d+) seconds \\(the demo's `Config.Wait`\\): one sent in the first (second|\\d+ seconds) gets 409")
	m := row.FindStringSubmatch(string(page))
	if m == nil {
		t.Fatalf("docs/getting-started.md has no tok_slow row matching %s", row)
	}
	secs := func(s string) time.Duration {
		if s == "second" {
			return time.Second
		}
		n, _ := strconv.Atoi(strings.TrimSuffix(s, " seconds"))
		return time.Duration(n) * time.Second
	}
	if got := secs(m[1]); got != payments.DefaultSlowLatency {
		t.Errorf("the doc says tok_slow takes %v, it takes %v", got, payments.DefaultSlowLatency)
	}
	if got := secs(m[2]); got != duplicateWait {
		t.Errorf("the doc says a duplicate waits %v, it waits %v", got, duplicateWait)
	}
	if secs(m[3]) != payments.DefaultSlowLatency-duplicateWait {
		t.Errorf("the doc's window for a 409 is %s, want %v", m[3], payments.DefaultSlowLatency-duplicateWait)
	}
}
