package dynalite

import (
	"fmt"
	"testing"
)

// fakeTB records Skip and Fatal calls instead of ending the test.
type fakeTB struct {
	testing.TB
	skipped, failed string
}

func (f *fakeTB) Helper() {}

func (f *fakeTB) Skipf(format string, args ...any) { f.skipped = fmt.Sprintf(format, args...) }

func (f *fakeTB) Fatalf(format string, args ...any) { f.failed = fmt.Sprintf(format, args...) }

func TestEndpoint(t *testing.T) {
	tests := []struct {
		name        string
		endpoint    string
		ci          string
		want        string
		skip, fatal bool
	}{
		{name: "set", endpoint: "http://127.0.0.1:8000", want: "http://127.0.0.1:8000"},
		{name: "set in CI", endpoint: "http://127.0.0.1:8000", ci: "true", want: "http://127.0.0.1:8000"},
		{name: "unset skips", skip: true},
		{name: "unset in CI fails", ci: "1", fatal: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(EnvEndpoint, tt.endpoint)
			t.Setenv(EnvCI, tt.ci)
			f := &fakeTB{TB: t}
			if got := Endpoint(f); got != tt.want {
				t.Errorf("Endpoint: got %q, want %q", got, tt.want)
			}
			if got := f.skipped != ""; got != tt.skip {
				t.Errorf("skipped: got %v (%q), want %v", got, f.skipped, tt.skip)
			}
			if got := f.failed != ""; got != tt.fatal {
				t.Errorf("failed: got %v (%q), want %v", got, f.failed, tt.fatal)
			}
		})
	}
}
