package dedupe_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
)

// TestErrorResult checks every row of ErrorResult's table: the status,
// the problem type, Retry-After, and that no error text reaches the body.
func TestErrorResult(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	inFlight := &dedupe.ConflictError{Err: dedupe.ErrInProgress, Record: dedupe.Record{LeaseExpiresAt: now.Add(2500 * time.Millisecond)}}
	tests := []struct {
		name       string
		err        error
		status     int
		problem    string
		retryAfter string
	}{
		{"in progress", fmt.Errorf("claim key:x: %w", inFlight), 409, dedupe.ProblemInProgress, "3"},
		{"reused", &dedupe.ConflictError{Err: dedupe.ErrFingerprintMismatch}, 422, dedupe.ProblemKeyReused, ""},
		{"omitted", fmt.Errorf("replay: %w", dedupe.ErrResultOmitted), 409, dedupe.ProblemResultUnavailable, ""},
		{"unreadable", fmt.Errorf("get secret-key-42: %w", dedupe.ErrResultUnreadable), 503, dedupe.ProblemResultUnreadable, "1"},
		{"store down", fmt.Errorf("claim: %w", dedupe.ErrStoreUnavailable), 503, dedupe.ProblemStoreUnavailable, "1"},
		{"invalid key", dedupe.ErrInvalidKey, 400, dedupe.ProblemKeyInvalid, ""},
		{"permanent", fmt.Errorf("claim secret-key-42: %w", dedupe.ErrKeyRejected), 500, dedupe.ProblemInternal, ""},
		{"the function's own", errors.New("card secret-key-42 declined"), 500, dedupe.ProblemInternal, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := dedupe.ErrorResult(tt.err, now)
			var p dedupe.Problem
			if err := json.Unmarshal(r.Body, &p); err != nil {
				t.Fatalf("body %q: %v", r.Body, err)
			}
			got := []any{r.StatusCode, p.Type, p.Status, r.Headers["Content-Type"][0], first(r.Headers["Retry-After"])}
			want := []any{tt.status, tt.problem, tt.status, dedupe.ProblemContentType, tt.retryAfter}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("got %v, want %v", got, want)
			}
			if b := string(r.Body); json.Valid(r.Body) && (contains(b, "secret-key-42") || contains(b, "claim")) {
				t.Errorf("body %s echoes the error", b)
			}
		})
	}
	if r := dedupe.ErrorResult(nil, now); r.StatusCode != 0 || r.Body != nil {
		t.Errorf("nil error: %+v, want the zero Result", r)
	}
}

func first(v []string) string {
	if len(v) == 0 {
		return ""
	}
	return v[0]
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
