package dynalite

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lambda-dedupe/dedupe/localtest/internal/proc"
)

// startServer starts dynalite for a test and stops it at cleanup.
func startServer(t *testing.T, opts Options) *Server {
	t.Helper()
	requireInstalled(t)
	// Start's own generous limit (DefaultStartTimeout) applies.
	s, err := Start(context.Background(), opts)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return s
}

// requireInstalled skips the test when dynalite is not installed, or fails
// it when CI is set.
func requireInstalled(t *testing.T) {
	t.Helper()
	root, err := moduleRoot()
	if err == nil {
		_, err = os.Stat(filepath.Join(root, binRel))
	}
	if err == nil {
		return
	}
	if os.Getenv(EnvCI) != "" {
		t.Fatalf("dynalite not installed: %v", err)
	}
	t.Skipf("dynalite not installed (%v): %s", err, installHint)
}

// call sends one DynamoDB JSON request and returns the response body.
func call(endpoint, op, body string) (int, string, error) {
	req, err := http.NewRequest(http.MethodPost, endpoint+"/", strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	req.Header.Set("X-Amz-Target", "DynamoDB_20120810."+op)
	req.Header.Set("X-Amz-Date", time.Now().UTC().Format("20060102T150405Z"))
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=local/20000101/us-east-1/dynamodb/aws4_request, SignedHeaders=host, Signature=0")
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// mustCall is call that fails the test unless the answer is 200 OK.
func mustCall(t *testing.T, endpoint, op, body string) string {
	t.Helper()
	code, resp, err := call(endpoint, op, body)
	if err != nil || code != http.StatusOK {
		t.Fatalf("%s: status %d, error %v, body %s", op, code, err, resp)
	}
	return resp
}

// waitActive waits until the table "items" is ACTIVE, for at most a
// generous minute: a busy machine can slow dynalite down a lot.
func waitActive(t *testing.T, endpoint string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if resp := mustCall(t, endpoint, "DescribeTable", `{"TableName":"items"}`); strings.Contains(resp, `"TableStatus":"ACTIVE"`) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("table items not ACTIVE after a minute")
}

const createTable = `{"TableName":"items","AttributeDefinitions":[{"AttributeName":"pk","AttributeType":"S"}],` +
	`"KeySchema":[{"AttributeName":"pk","KeyType":"HASH"}],"BillingMode":"PAY_PER_REQUEST"}`

// groupGone reports whether no process of the group pgid is left.
func groupGone(pgid int) bool {
	return errors.Is(syscall.Kill(-pgid, 0), syscall.ESRCH)
}

func TestStartServesRequests(t *testing.T) {
	s := startServer(t, Options{})
	if got, want := s.Endpoint(), fmt.Sprintf("http://127.0.0.1:%d", s.Port()); got != want {
		t.Errorf("Endpoint() = %q, want %q", got, want)
	}
	if s.Stopped() {
		t.Errorf("Stopped() = true, want false")
	}
	// With createTableMs 0, CreateTable still answers CREATING and turns
	// the table ACTIVE on dynalite's next tick, which a fast next request
	// can beat: wait for it, as a DynamoDB client must.
	mustCall(t, s.Endpoint(), "CreateTable", createTable)
	waitActive(t, s.Endpoint())
	mustCall(t, s.Endpoint(), "PutItem", `{"TableName":"items","Item":{"pk":{"S":"k"},"v":{"N":"1"}}}`)
	if got, want := mustCall(t, s.Endpoint(), "GetItem", `{"TableName":"items","Key":{"pk":{"S":"k"}},"ConsistentRead":true}`),
		`{"Item":{"pk":{"S":"k"},"v":{"N":"1"}}}`; got != want {
		t.Errorf("GetItem: got %s, want %s", got, want)
	}
}

func TestStopLeavesNoProcess(t *testing.T) {
	s := startServer(t, Options{})
	pid := s.proc.cmd.Process.Pid
	if err := s.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if !groupGone(pid) {
		t.Errorf("process group %d still exists after Stop", pid)
	}
	if !s.Stopped() {
		t.Errorf("Stopped() = false, want true")
	}
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", s.Port()))
	if err != nil {
		t.Errorf("port %d not free after Stop: %v", s.Port(), err)
	} else {
		l.Close()
	}
	if err := s.Stop(); err != nil {
		t.Errorf("second Stop: got %v, want nil", err)
	}
}

func TestRestartKeepsPortAndLosesData(t *testing.T) {
	s := startServer(t, Options{})
	endpoint := s.Endpoint()
	mustCall(t, endpoint, "CreateTable", createTable)
	waitActive(t, endpoint)

	// Outage: stop, see requests fail, come back on the same port.
	if err := s.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if _, _, err := call(endpoint, "ListTables", "{}"); err == nil {
		t.Errorf("ListTables while stopped: got nil error, want a connection error")
	}
	if err := s.Restart(context.Background()); err != nil {
		t.Fatalf("Restart after Stop: %v", err)
	}
	if got := s.Endpoint(); got != endpoint {
		t.Errorf("Endpoint() after Restart = %q, want %q", got, endpoint)
	}
	if got, want := mustCall(t, endpoint, "ListTables", "{}"), `{"TableNames":[]}`; got != want {
		t.Errorf("ListTables after Restart: got %s, want %s", got, want)
	}

	// Restart of a running server stops the old process first.
	old := s.proc.cmd.Process.Pid
	if err := s.Restart(context.Background()); err != nil {
		t.Fatalf("Restart while running: %v", err)
	}
	if !groupGone(old) {
		t.Errorf("old process group %d still exists after Restart", old)
	}
	mustCall(t, endpoint, "ListTables", "{}")
}

func TestStopAfterUnexpectedExit(t *testing.T) {
	s := startServer(t, Options{})
	p := s.proc
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-p.done
	if !s.Stopped() {
		t.Errorf("Stopped() = false after the process died, want true")
	}
	if err := s.Stop(); !errors.Is(err, ErrExited) {
		t.Errorf("Stop: got %v, want %v", err, ErrExited)
	}
}

func TestStartErrors(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	requireInstalled(t) // for the port-in-use case

	tests := []struct {
		name string
		opts Options
		want error
		out  string
	}{
		{
			name: "missing executable",
			opts: Options{Bin: filepath.Join(t.TempDir(), "dynalite")},
			want: ErrNotInstalled,
			out:  "make deps",
		},
		{
			name: "port in use",
			opts: Options{Port: busy.Addr().(*net.TCPAddr).Port},
			want: ErrNotReady,
			out:  "EADDRINUSE",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Start(context.Background(), tt.opts)
			if err == nil {
				s.Stop()
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("Start: got %v, want %v", err, tt.want)
			}
			if !strings.Contains(err.Error(), tt.out) {
				t.Errorf("Start error: got %q, want it to mention %q", err, tt.out)
			}
		})
	}
}

// TestServerSurvivesADroppedRequest: a client that drops its connection
// while it sends a request (a test process killed by go test's timeout,
// or by make mutate) leaves the server up. dynalite 4.0.0 alone threw on
// the aborted request and exited, and every test after it failed as if
// its code had. The server says it discarded each request, and keeps its
// tables.
func TestServerSurvivesADroppedRequest(t *testing.T) {
	out := &proc.Tail{}
	s := startServer(t, Options{Output: out})
	mustCall(t, s.Endpoint(), "CreateTable", `{"TableName":"kept","AttributeDefinitions":[{"AttributeName":"pk","AttributeType":"S"}],"KeySchema":[{"AttributeName":"pk","KeyType":"HASH"}],"BillingMode":"PAY_PER_REQUEST"}`)
	const drops = 3
	for range drops {
		conn, err := net.Dial("tcp", "127.0.0.1:"+fmt.Sprint(s.Port()))
		if err != nil {
			t.Fatal(err)
		}
		// Headers and part of a body, then the connection is reset, as
		// by a killed process.
		fmt.Fprintf(conn, "POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-amz-json-1.0\r\n"+
			"X-Amz-Target: DynamoDB_20120810.ListTables\r\nContent-Length: 1000\r\n\r\n{\"Lim")
		if tc, ok := conn.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		conn.Close()
	}
	// Until the server has seen every reset: it says so, or it exits (as
	// dynalite alone did at once). A server that does neither fails at
	// the test's deadline.
	for strings.Count(out.String(), "dropped its connection mid-request") < drops {
		if s.Stopped() {
			t.Fatalf("dynalite exited after a client dropped its connection mid-request:\n%s", out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if body := mustCall(t, s.Endpoint(), "ListTables", `{}`); !strings.Contains(body, `"kept"`) || s.Stopped() {
		t.Fatalf("ListTables = %s, stopped %v; want the table created before, the server up", body, s.Stopped())
	}
}
