package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/dynamostore"
)

// The tests in this file pin what show prints of a record (view,
// printRecord), which mutation testing (make mutate
// PKG=./cmd/dedupe/internal/cli) found no test of the package noticing.

// shown returns show's text and view of rec.
func shown(rec dedupe.Record, obj *dynamostore.Object) (string, recordView) {
	now := time.Date(2030, 6, 1, 12, 0, 0, 0, time.UTC)
	v := view(found{Record: rec, object: obj}, now, false)
	var b bytes.Buffer
	printRecord(&b, v)
	return b.String(), v
}

// TestShowNamesTheFirstOwnerOfATakeover: a record whose first owner is
// not its owner was taken over, and show says so; one still held by its
// first owner (or written before first owners were stored) names no
// first owner.
func TestShowNamesTheFirstOwnerOfATakeover(t *testing.T) {
	base := dedupe.Record{Key: "p#k", Status: dedupe.StatusInProgress, Token: "tok-2"}
	for _, tt := range []struct {
		name, first, want string
	}{
		{"taken over", "tok-1", "tok-1"},
		{"first owner", "tok-2", ""},
		{"no first owner stored", "", ""},
	} {
		rec := base
		rec.FirstToken = tt.first
		text, v := shown(rec, nil)
		line := strings.Contains(text, "first owner:  "+tt.want+" (taken over)")
		if v.FirstOwner != tt.want || line != (tt.want != "") || (tt.want == "" && strings.Contains(text, "first owner")) {
			t.Errorf("%s: first owner %q, line %v in\n%s\nwant %q", tt.name, v.FirstOwner, line, text, tt.want)
		}
	}
}

// TestShowLeaseOnlyInFlight: the lease is shown for an IN_PROGRESS record
// only; a completed one has none that matters.
func TestShowLeaseOnlyInFlight(t *testing.T) {
	lease := time.Date(2030, 6, 1, 12, 5, 0, 0, time.UTC)
	for status, want := range map[dedupe.Status]bool{dedupe.StatusInProgress: true, dedupe.StatusCompleted: false} {
		text, v := shown(dedupe.Record{Key: "p#k", Status: status, Token: "t", LeaseExpiresAt: lease,
			Result: &dedupe.Result{StatusCode: 201}}, nil)
		if got := strings.Contains(text, "lease until:  2030-06-01T12:05:00Z"); got != want || (v.LeaseExpiresAt != nil) != want {
			t.Errorf("%s: lease shown %v (view %v), want %v:\n%s", status, got, v.LeaseExpiresAt, want, text)
		}
	}
}

// TestShowTraceWhenStored: the trace line appears when the record carries
// one, and not otherwise.
func TestShowTraceWhenStored(t *testing.T) {
	for trace, want := range map[string]bool{"Root=1-abc": true, "": false} {
		text, _ := shown(dedupe.Record{Key: "p#k", Status: dedupe.StatusCompleted, Token: "t", Trace: trace}, nil)
		if got := strings.Contains(text, "trace:"); got != want || (want && !strings.Contains(text, "trace:        Root=1-abc\n")) {
			t.Errorf("trace %q: line shown %v, want %v:\n%s", trace, got, want, text)
		}
	}
}

// TestShowObjectEncoding: a body in S3 is shown with its encoding, an
// object that names none as identity.
func TestShowObjectEncoding(t *testing.T) {
	for enc, want := range map[string]string{"": dynamostore.EncodingIdentity, "gzip": "gzip"} {
		text, _ := shown(dedupe.Record{Key: "p#k", Status: dedupe.StatusCompleted, Token: "t", Result: &dedupe.Result{StatusCode: 200}},
			&dynamostore.Object{Bucket: "b", Name: "o", Size: 3, Encoding: enc})
		if !strings.Contains(text, "bytes stored ("+want+")\n") {
			t.Errorf("encoding %q: want (%s) in\n%s", enc, want, text)
		}
	}
}

// TestShowOmittedResult: a completed record stored without its result is
// shown as omitted (duplicates get 409 response unavailable), not as a
// completed one whose response is replayed.
func TestShowOmittedResult(t *testing.T) {
	text, v := shown(dedupe.Record{Key: "p#k", Status: dedupe.StatusCompleted, Token: "t", ResultOmitted: true}, nil)
	if v.State != "omitted" || !strings.Contains(text, "response:     omitted") {
		t.Errorf("state %q, want omitted:\n%s", v.State, text)
	}
}
