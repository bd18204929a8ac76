package dedupe

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestLogLineCarriesWhatTheEventHas states the invariant of the guard's
// log line: each optional attribute (original_request_id, waited_ms) is
// there exactly when the event has it, and durations are milliseconds
// to the microsecond.
func TestLogLineCarriesWhatTheEventHas(t *testing.T) {
	var buf bytes.Buffer
	g := New(uncalledStore{}, &Config{Logger: slog.New(slog.NewJSONHandler(&buf, nil))})
	line := func(ev Event) map[string]any {
		buf.Reset()
		g.emit(context.Background(), ev)
		var m map[string]any
		if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
			t.Fatalf("log line %q: %v", buf.String(), err)
		}
		return m
	}
	full := line(Event{Outcome: OutcomeWaited, OriginalRequestID: "req-0", Waited: 1500 * time.Microsecond,
		StoreLatency: 2250 * time.Microsecond, HandlerLatency: 3 * time.Second})
	for attr, want := range map[string]any{"original_request_id": "req-0", "waited_ms": 1.5, "store_ms": 2.25, "handler_ms": 3000.0} {
		if full[attr] != want {
			t.Errorf("%s = %v, want %v (line %v)", attr, full[attr], want, full)
		}
	}
	bare := line(Event{Outcome: OutcomeExecuted})
	for _, attr := range []string{"original_request_id", "waited_ms"} {
		if v, ok := bare[attr]; ok {
			t.Errorf("an event without %s logs it as %v", attr, v)
		}
	}
}

// failingWriter fails every write.
type failingWriter struct{}

var errDiskFull = errors.New("disk full")

func (failingWriter) Write([]byte) (int, error) { return 0, errDiskFull }

// TestEMFWriteReportsTheWriter states EMF.Write's contract: nil when the
// line was written, one whole line; an error wrapping the writer's when
// it was not.
func TestEMFWriteReportsTheWriter(t *testing.T) {
	var buf bytes.Buffer
	e := &EMF{W: &buf, FunctionName: "fn"}
	if err := e.Write(map[string]string{"Route": "-"}, []Metric{{Name: "n", Unit: "Count", Value: 1}}); err != nil {
		t.Errorf("Write to a buffer: %v", err)
	}
	if s := buf.String(); strings.Count(s, "\n") != 1 || !strings.HasSuffix(s, "\n") {
		t.Errorf("wrote %q, want one line", s)
	}
	e = &EMF{W: failingWriter{}, FunctionName: "fn"}
	if err := e.Write(nil, nil); !errors.Is(err, errDiskFull) {
		t.Errorf("Write to a failing writer: %v, want the writer's error", err)
	}
}
