package cli_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/lambda-dedupe/dedupe/cmd/dedupe/internal/cli"
)

// TestStoreFromEnvironment: the command picks its store as the functions
// do, from flags or else from their environment variables, and with
// neither it names both ways instead of guessing a store; an environment
// variable it reads is held to what the flag it stands for accepts. Each
// case fails before any call (the endpoint is closed).
func TestStoreFromEnvironment(t *testing.T) {
	closed := []string{"--endpoint", "http://127.0.0.1:1"}
	t.Setenv("AWS_ACCESS_KEY_ID", "x")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "x")
	t.Setenv("AWS_REGION", "us-east-1")
	for _, tt := range []struct {
		name string
		env  map[string]string
		args []string
		want string // in stderr, with ExitUsage
	}{
		{"no store at all", nil, []string{"show", "key:000000000000"}, "no store: pass --table, --redis or --postgres"},
		{"DEDUPE_STORE names none of its variables", map[string]string{"DEDUPE_STORE": "redis"}, []string{"show", "key:000000000000"}, "no store"},
		{"DEDUPE_SHARDS not a number", map[string]string{"IDEMPOTENCY_TABLE": "t", "DEDUPE_SHARDS": "eight"}, append([]string{"show", "key:000000000000"}, closed...), `DEDUPE_SHARDS="eight"`},
		{"DEDUPE_SHARDS zero", map[string]string{"IDEMPOTENCY_TABLE": "t", "DEDUPE_SHARDS": "0"}, append([]string{"show", "key:000000000000"}, closed...), `DEDUPE_SHARDS="0"`},
		{"DEDUPE_KEY_SCHEMA unknown", map[string]string{"IDEMPOTENCY_TABLE": "t", "DEDUPE_KEY_SCHEMA": "hash"}, append([]string{"show", "key:000000000000"}, closed...), "--key-schema (or $DEDUPE_KEY_SCHEMA)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, _, errOut := runEnv(t, tt.env, "oncall-alice", "", tt.args...)
			if code != cli.ExitUsage || !strings.Contains(errOut, tt.want) {
				t.Errorf("exit %d, stderr:\n%s\nwant exit %d and %q", code, errOut, cli.ExitUsage, tt.want)
			}
		})
	}
	// --shards, when given, is what counts: DEDUPE_SHARDS is not read.
	code, _, errOut := runEnv(t, map[string]string{"IDEMPOTENCY_TABLE": "t", "DEDUPE_SHARDS": "eight"}, "oncall-alice", "", append([]string{"show", "key:000000000000", "--shards", "8"}, closed...)...)
	if code == cli.ExitUsage || strings.Contains(errOut, "DEDUPE_SHARDS") {
		t.Errorf("--shards 8 with DEDUPE_SHARDS=eight: exit %d, stderr:\n%s\nwant DEDUPE_SHARDS unread", code, errOut)
	}
	// A positive DEDUPE_SHARDS, without --shards, is taken as the flag's
	// value would be: not refused.
	code, _, errOut = runEnv(t, map[string]string{"IDEMPOTENCY_TABLE": "t", "DEDUPE_SHARDS": "8"}, "oncall-alice", "", append([]string{"show", "key:000000000000"}, closed...)...)
	if code == cli.ExitUsage || strings.Contains(errOut, "DEDUPE_SHARDS") {
		t.Errorf("DEDUPE_SHARDS=8: exit %d, stderr:\n%s\nwant it accepted", code, errOut)
	}
}

// TestRegionFlagSignsForThatRegion: --region is the Region the command's
// requests are signed for, over the AWS configuration's (AWS_REGION): on
// AWS a request signed for another Region is refused, or reaches another
// Region's table. The endpoint is a recorder that answers every request
// with an error.
func TestRegionFlagSignsForThatRegion(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "x")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "x")
	t.Setenv("AWS_REGION", "us-east-1")
	var mu sync.Mutex
	var auth []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth = append(auth, r.Header.Get("Authorization"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.WriteHeader(http.StatusBadRequest)
		w.Write([]byte(`{"__type":"com.amazon.coral.validate#ValidationException","message":"recorded"}`))
	}))
	defer srv.Close()
	for _, tt := range []struct {
		args  []string
		scope string
	}{
		{[]string{"--region", "eu-west-3"}, "/eu-west-3/dynamodb/"},
		{nil, "/us-east-1/dynamodb/"},
	} {
		mu.Lock()
		auth = nil
		mu.Unlock()
		runEnv(t, nil, "oncall-alice", "", append([]string{"show", "key:000000000000", "--table", "t", "--endpoint", srv.URL}, tt.args...)...)
		mu.Lock()
		got := append([]string(nil), auth...)
		mu.Unlock()
		if len(got) == 0 {
			t.Fatalf("%v: no request reached the endpoint", tt.args)
		}
		for _, a := range got {
			if !strings.Contains(a, tt.scope) {
				t.Errorf("%v: a request signed %q, want the scope %s", tt.args, a, tt.scope)
			}
		}
	}
}
