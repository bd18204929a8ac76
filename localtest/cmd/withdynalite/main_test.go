package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/lambda-dedupe/dedupe/localtest/dynalite"
	"github.com/lambda-dedupe/dedupe/localtest/dynamoserver"
	"github.com/lambda-dedupe/dedupe/localtest/moto"
)

// helperEnv makes the test binary act as the child command: it prints the
// AWS and DEDUPE variables it sees as JSON, checks the endpoint answers if asked to,
// and exits with the code in WITHDYNALITE_HELPER.
const helperEnv = "WITHDYNALITE_HELPER"

func TestMain(m *testing.M) {
	if code := os.Getenv(helperEnv); code != "" {
		helper(code)
	}
	os.Exit(m.Run())
}

func helper(code string) {
	seen := map[string]string{}
	for _, kv := range os.Environ() {
		if k, v, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "AWS_") || strings.HasPrefix(k, "DEDUPE_") {
			seen[k] = v
		}
	}
	if os.Getenv("WITHDYNALITE_PING") != "" {
		req, _ := http.NewRequest(http.MethodPost, os.Getenv(dynalite.EnvEndpoint), strings.NewReader("{}"))
		req.Header.Set("Content-Type", "application/x-amz-json-1.0")
		req.Header.Set("X-Amz-Target", "DynamoDB_20120810.ListTables")
		req.Header.Set("X-Amz-Date", time.Now().UTC().Format("20060102T150405Z"))
		req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=local/20000101/us-east-1/dynamodb/aws4_request, SignedHeaders=host, Signature=0")
		resp, err := http.DefaultClient.Do(req)
		seen["ping"] = "error"
		if err == nil {
			seen["ping"] = resp.Status
			resp.Body.Close()
		}
	}
	json.NewEncoder(os.Stdout).Encode(seen)
	switch code {
	case "0":
		os.Exit(0)
	case "3":
		os.Exit(3)
	}
	os.Exit(99)
}

// baseEnv is a minimal environment without any AWS variable.
func baseEnv() []string {
	return []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
}

func TestRun(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		env       []string
		args      []string
		wantCode  int
		want      map[string]string // variables the child must see; "" means absent
		dynalite  bool              // the endpoint must be a fresh dynalite
		moto      bool              // the endpoint must be a fresh moto_server
		wantInErr string
	}{
		{
			name:     "preset remote endpoint: no dynalite, no dummy credentials",
			env:      []string{dynalite.EnvEndpoint + "=https://dynamodb.eu-west-1.amazonaws.com", helperEnv + "=3"},
			args:     []string{"--", self},
			wantCode: 3,
			want: map[string]string{
				dynalite.EnvEndpoint: "https://dynamodb.eu-west-1.amazonaws.com",
				"AWS_ACCESS_KEY_ID":  "", "AWS_REGION": "",
			},
		},
		{
			name:     "preset loopback endpoint keeps set variables",
			env:      []string{dynalite.EnvEndpoint + "=http://localhost:8000", "AWS_REGION=eu-west-1", helperEnv + "=0"},
			args:     []string{"--", self},
			wantCode: 0,
			want: map[string]string{
				dynalite.EnvEndpoint: "http://localhost:8000", dynamoserver.EnvServer: "endpoint",
				"AWS_REGION": "eu-west-1", "AWS_ACCESS_KEY_ID": "local", "AWS_SECRET_ACCESS_KEY": "local",
			},
		},
		{
			name:     "no endpoint starts dynalite",
			env:      []string{helperEnv + "=3", "WITHDYNALITE_PING=1"},
			args:     []string{"--", self},
			wantCode: 3,
			want: map[string]string{
				"AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "local", "AWS_SECRET_ACCESS_KEY": "local",
				"ping": "200 OK", dynamoserver.EnvServer: "dynalite",
			},
			dynalite: true,
		},
		{
			name:     "DEDUPE_DYNAMODB=moto starts moto even with a preset endpoint",
			env:      []string{dynamoserver.EnvSelect + "=moto", dynalite.EnvEndpoint + "=http://localhost:8000", helperEnv + "=0", "WITHDYNALITE_PING=1"},
			args:     []string{"--", self},
			wantCode: 0,
			want:     map[string]string{dynamoserver.EnvServer: "moto", "ping": "200 OK", "AWS_REGION": "us-east-1"},
			moto:     true,
		},
		{
			name:     "-server URL beats DEDUPE_DYNAMODB",
			env:      []string{dynamoserver.EnvSelect + "=moto", helperEnv + "=0"},
			args:     []string{"-server", "http://127.0.0.1:8000", "--", self},
			wantCode: 0,
			want:     map[string]string{dynalite.EnvEndpoint: "http://127.0.0.1:8000", dynamoserver.EnvServer: "endpoint"},
		},
		{
			name:      "bad server",
			env:       []string{dynamoserver.EnvSelect + "=dynamodb-local"},
			args:      []string{"--", "true"},
			wantCode:  2,
			wantInErr: "want dynalite, moto or an http(s) endpoint URL",
		},
		{
			name:      "-dynalite names the executable",
			args:      []string{"-server", "dynalite", "-dynalite", "/no/such/dynalite", "--", self},
			wantCode:  1,
			wantInErr: "/no/such/dynalite",
		},
		{
			name:      "DYNALITE_BIN names the executable",
			env:       []string{"DYNALITE_BIN=/no/such/dynalite-bin"},
			args:      []string{"-server", "dynalite", "--", self},
			wantCode:  1,
			wantInErr: "/no/such/dynalite-bin",
		},
		{
			name:      "no command",
			env:       []string{dynalite.EnvEndpoint + "=http://localhost:8000"},
			wantCode:  2,
			wantInErr: "usage",
		},
		{
			name:      "command not found",
			env:       []string{dynalite.EnvEndpoint + "=http://localhost:8000"},
			args:      []string{"--", "withdynalite-no-such-command"},
			wantCode:  127,
			wantInErr: "not found",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.dynalite {
				// The child must see a dynalite started for it, so this
				// case needs dynalite installed; Endpoint says how.
				requireDynalite(t)
			}
			if tt.moto {
				requireMoto(t)
			}
			var stdout, stderr bytes.Buffer
			code := run(tt.args, append(baseEnv(), tt.env...), nil, &stdout, &stderr)
			if code != tt.wantCode {
				t.Errorf("exit code: got %d, want %d (stderr: %s)", code, tt.wantCode, &stderr)
			}
			if !strings.Contains(stderr.String(), tt.wantInErr) {
				t.Errorf("stderr: got %q, want it to contain %q", &stderr, tt.wantInErr)
			}
			if tt.want == nil {
				return
			}
			var seen map[string]string
			if err := json.Unmarshal(stdout.Bytes(), &seen); err != nil {
				t.Fatalf("child output %q: %v", &stdout, err)
			}
			for k, want := range tt.want {
				if got := seen[k]; got != want {
					t.Errorf("%s: got %q, want %q", k, got, want)
				}
			}
			if !tt.dynalite && !tt.moto {
				return
			}
			ep := seen[dynalite.EnvEndpoint]
			if !strings.HasPrefix(ep, "http://127.0.0.1:") {
				t.Fatalf("%s: got %q, want a started server on 127.0.0.1", dynalite.EnvEndpoint, ep)
			}
			if resp, err := http.Post(ep, "application/x-amz-json-1.0", strings.NewReader("{}")); err == nil {
				resp.Body.Close()
				t.Errorf("server at %s still answers after run returned", ep)
			}
		})
	}
}

// requireDynalite skips the test when dynalite cannot be started, or fails
// it when CI is set.
func requireDynalite(t *testing.T) {
	t.Helper()
	srv, err := dynalite.Start(t.Context(), dynalite.Options{})
	if err != nil {
		if os.Getenv(dynalite.EnvCI) != "" {
			t.Fatalf("dynalite required in CI: %v", err)
		}
		t.Skip(err)
	}
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
}

// requireMoto skips the test when moto_server is not on PATH, or fails it
// when CI is set.
func requireMoto(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath(moto.DefaultBin); err != nil {
		if os.Getenv(dynalite.EnvCI) != "" {
			t.Fatalf("moto_server required in CI: %v", err)
		}
		t.Skipf("moto_server not installed (%v): %s", err, moto.InstallHint)
	}
}

func TestIsLoopback(t *testing.T) {
	tests := []struct {
		name     string
		endpoint string
		want     bool
	}{
		{name: "ipv4", endpoint: "http://127.0.0.1:8000", want: true},
		{name: "localhost", endpoint: "http://localhost:8000", want: true},
		{name: "ipv6", endpoint: "http://[::1]:8000", want: true},
		{name: "aws", endpoint: "https://dynamodb.us-east-1.amazonaws.com", want: false},
		{name: "lan", endpoint: "http://10.0.0.5:8000", want: false},
		{name: "garbage", endpoint: "::not a url", want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := isLoopback(tt.endpoint); got != tt.want {
				t.Errorf("isLoopback(%q): got %v, want %v", tt.endpoint, got, tt.want)
			}
		})
	}
}
