package gateway

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lambda-dedupe/dedupe/infra"
)

func TestStack(t *testing.T) {
	needProcesses(t)
	fns := []infra.Function{{
		LogicalID:  "EchofnFunction",
		Timeout:    2 * time.Second,
		MemorySize: 256,
		Env:        map[string]string{"GREETING": "from template", "AWS_ENDPOINT_URL_DYNAMODB": "http://template"},
		Routes: []infra.Route{
			{Event: "Get", Method: "GET", Path: "/echo/{id}", PayloadFormatVersion: "2.0", Timeout: 30 * time.Second},
		},
		Schedules: []infra.Schedule{{Event: "Tick", Expression: "rate(1 minute)", Enabled: true}},
	}}
	s, err := NewStack(StackConfig{
		Functions:    fns,
		BootstrapDir: filepath.Dir(filepath.Dir(testEcho)),
		RIE:          testRIE,
		Env:          map[string]string{"AWS_ENDPOINT_URL_DYNAMODB": "http://127.0.0.1:1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := s.Routes(); len(got) != 1 || got[0] != (StackRoute{Key: "GET /echo/{id}", Function: "EchofnFunction"}) {
		t.Errorf("got routes %+v, want GET /echo/{id} on EchofnFunction", got)
	}

	srv := httptest.NewServer(s.Gateway)
	defer srv.Close()
	resp, body := do(t, mustRequest(t, "GET", srv.URL+"/echo/7?env=GREETING&env=AWS_ENDPOINT_URL_DYNAMODB&env=AWS_LAMBDA_FUNCTION_TIMEOUT"))
	if resp.StatusCode != 200 {
		t.Fatalf("got %d %s, want 200", resp.StatusCode, body)
	}
	var a echoAnswer
	if err := json.Unmarshal(body, &a); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"GREETING": "from template", "AWS_ENDPOINT_URL_DYNAMODB": "http://127.0.0.1:1", "AWS_LAMBDA_FUNCTION_TIMEOUT": "2"}
	for k, v := range want {
		if a.Env[k] != v {
			t.Errorf("%s: got %q, want %q", k, a.Env[k], v)
		}
	}

	scheds := s.Schedules()
	if len(scheds) != 1 {
		t.Fatalf("got schedules %+v, want 1", scheds)
	}
	result, err := s.InvokeSchedule(context.Background(), scheds[0])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(result), `"detail-type":"Scheduled Event"`) {
		t.Errorf("got %s, want the function to have received a Scheduled Event", result)
	}
	if pids := s.PIDs(); len(pids) != 1 {
		t.Errorf("got emulators %v, want 1 (warm environment reused)", pids)
	}
	pids := s.PIDs()
	s.Close()
	for _, pid := range pids {
		if alive(pid) {
			t.Errorf("emulator %d alive after Close", pid)
		}
	}
}

func TestStackRejects(t *testing.T) {
	needProcesses(t)
	dir := filepath.Dir(filepath.Dir(testEcho))
	tests := []struct {
		name string
		fns  []infra.Function
	}{
		{name: "missing bootstrap", fns: []infra.Function{{LogicalID: "NoSuchFunction"}}},
		{name: "payload 1.0", fns: []infra.Function{{LogicalID: "EchofnFunction", Routes: []infra.Route{{Method: "GET", Path: "/x", PayloadFormatVersion: "1.0"}}}}},
		{name: "route twice", fns: []infra.Function{{LogicalID: "EchofnFunction", Routes: []infra.Route{{Method: "GET", Path: "/x"}, {Method: "GET", Path: "/x"}}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if s, err := NewStack(StackConfig{Functions: tt.fns, BootstrapDir: dir, RIE: testRIE}); err == nil {
				s.Close()
				t.Error("got no error")
			}
		})
	}
}
