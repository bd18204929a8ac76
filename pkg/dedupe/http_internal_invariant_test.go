package dedupe

import (
	"testing"
	"time"
)

// TestTypicalDurationIsAMovingAverage states what a 409's Retry-After is
// based on (routeDurations): per route, the handler's typical duration is
// a moving average of weight 1/4. The first duration seen is taken as it
// is; each next one moves the average a quarter of the way toward it, up
// or down; a route never seen has none, and routes do not mix.
func TestTypicalDurationIsAMovingAverage(t *testing.T) {
	var r routeDurations
	if got := r.get("POST /a"); got != 0 {
		t.Fatalf("a route never seen: %v, want 0", got)
	}
	steps := []struct{ seen, want time.Duration }{
		{400 * time.Millisecond, 400 * time.Millisecond}, // the first is taken as it is
		{800 * time.Millisecond, 500 * time.Millisecond}, // a quarter of the way up
		{100 * time.Millisecond, 400 * time.Millisecond}, // a quarter of the way down
		{400 * time.Millisecond, 400 * time.Millisecond}, // the average itself leaves it
	}
	for i, s := range steps {
		r.observe("POST /a", s.seen)
		if got := r.get("POST /a"); got != s.want {
			t.Fatalf("after %d durations (last %v): typical %v, want %v", i+1, s.seen, got, s.want)
		}
	}
	r.observe("POST /b", time.Second)
	if a, b := r.get("POST /a"), r.get("POST /b"); a != 400*time.Millisecond || b != time.Second {
		t.Errorf("routes mixed: POST /a %v, POST /b %v; want 400ms and 1s", a, b)
	}
}
