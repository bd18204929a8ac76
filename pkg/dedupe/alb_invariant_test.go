package dedupe_test

import (
	"context"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/memstore"
)

// TestALBReplayKeepsAnyStatusDescription states ALB's replay invariant
// for the status line: a replay carries the statusDescription the
// handler answered with, byte for byte, in either header mode, also one
// that is not the status's standard reason phrase; a handler that sent
// none gets the code and its reason phrase, which ALB requires.
func TestALBReplayKeepsAnyStatusDescription(t *testing.T) {
	for _, tc := range []struct{ file, desc, want string }{
		{"alb-target-group.json", "201 Payment Accepted", "201 Payment Accepted"},
		{"alb-target-group-multi.json", "201 Payment Accepted", "201 Payment Accepted"},
		{"alb-target-group.json", "201 Created", "201 Created"},
		{"alb-target-group.json", "", "201 Created"},
		{"alb-target-group-multi.json", "", "201 Created"},
	} {
		runs := 0
		g := dedupe.New(memstore.New(), &dedupe.Config{Now: newTestClock().Now})
		h := dedupe.ALB(g, &dedupe.HTTPConfig{Principal: func(any) string { return "alice" }}, func(context.Context, events.ALBTargetGroupRequest) (events.ALBTargetGroupResponse, error) {
			runs++
			return events.ALBTargetGroupResponse{StatusCode: 201, StatusDescription: tc.desc, Body: "ok"}, nil
		})
		var ev events.ALBTargetGroupRequest
		fixture(t, tc.file, &ev)
		first, err1 := h(context.Background(), ev)
		again, err2 := h(context.Background(), ev)
		if err1 != nil || err2 != nil || runs != 1 {
			t.Fatalf("%s, %q: errors %v, %v after %d runs; want one run", tc.file, tc.desc, err1, err2, runs)
		}
		if first.StatusDescription != tc.desc {
			t.Errorf("%s, %q: the first answer's statusDescription is %q, want the handler's", tc.file, tc.desc, first.StatusDescription)
		}
		if again.StatusCode != 201 || again.StatusDescription != tc.want {
			t.Errorf("%s, %q: replayed %d %q, want 201 %q", tc.file, tc.desc, again.StatusCode, again.StatusDescription, tc.want)
		}
	}
}
