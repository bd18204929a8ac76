package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// lockedBuffer collects a pool's output for the failure message.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// newEchoPool returns a pool running echofn, closed when the test ends.
func newEchoPool(t *testing.T, edit func(*PoolConfig)) (*Pool, *lockedBuffer) {
	t.Helper()
	needProcesses(t)
	out := &lockedBuffer{}
	cfg := PoolConfig{
		RIE: testRIE,
		Function: Function{
			Name:      "echo",
			Bootstrap: testEcho,
			Timeout:   5 * time.Second,
			Env:       map[string]string{"GREETING": "hello"},
		},
		Output: out,
	}
	if edit != nil {
		edit(&cfg)
	}
	p, err := NewPool(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Close()
		if t.Failed() {
			t.Logf("pool output:\n%s", out)
		}
	})
	return p, out
}

// echoAnswer is what echofn puts in its response body.
type echoAnswer struct {
	PID   int               `json:"pid"`
	Event json.RawMessage   `json:"event"`
	Env   map[string]string `json:"env"`
}

// invokeEcho invokes echofn with an HTTP event for /test?query.
func invokeEcho(ctx context.Context, p *Pool, query string) (*echoAnswer, error) {
	ev, _ := json.Marshal(map[string]any{"rawPath": "/test", "rawQueryString": query})
	result, err := p.Invoke(ctx, ev)
	if err != nil {
		return nil, err
	}
	var resp struct {
		StatusCode int    `json:"statusCode"`
		Body       string `json:"body"`
	}
	if err := json.Unmarshal(result, &resp); err != nil {
		return nil, fmt.Errorf("result %s: %v", result, err)
	}
	var a echoAnswer
	if err := json.Unmarshal([]byte(resp.Body), &a); err != nil {
		return nil, fmt.Errorf("body %s: %v", resp.Body, err)
	}
	return &a, nil
}

// alive reports whether process pid exists and is not a zombie.
func alive(pid int) bool {
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		i := bytes.LastIndexByte(b, ')')
		return i < 0 || !bytes.HasPrefix(bytes.TrimSpace(b[i+1:]), []byte("Z"))
	}
	return syscall.Kill(pid, 0) == nil
}

func TestPoolReusesWarmEnvironment(t *testing.T) {
	p, out := newEchoPool(t, nil)
	ctx := context.Background()
	first, err := invokeEcho(ctx, p, "")
	if err != nil {
		t.Fatal(err)
	}
	second, err := invokeEcho(ctx, p, "")
	if err != nil {
		t.Fatal(err)
	}
	if first.PID != second.PID {
		t.Errorf("got runtime pids %d and %d, want the same warm runtime", first.PID, second.PID)
	}
	s := p.Stats()
	if s.Started != 1 || s.ColdStarts != 1 || s.Invocations != 2 || s.Live != 1 || s.Busy != 0 {
		t.Errorf("got stats %+v, want 1 started, 1 cold start, 2 invocations, 1 live, 0 busy", s)
	}
	t.Logf("cold start: %v", s.ColdStartMax)
	if !strings.Contains(out.String(), "[echo#1] echofn: init pid") {
		t.Errorf("got output %q, want the runtime's lines prefixed with [echo#1]", out)
	}
	if strings.Contains(out.String(), "START RequestId") {
		t.Errorf("got output %q, want the emulator's START lines dropped", out)
	}
}

func TestPoolEnvironment(t *testing.T) {
	t.Setenv("HOST_ONLY_SECRET", "do-not-leak")
	p, _ := newEchoPool(t, func(c *PoolConfig) {
		c.Function.Timeout = 1500 * time.Millisecond
		c.Function.MemoryMB = 256
		c.Function.Env["AWS_LAMBDA_FUNCTION_NAME"] = "overridden?"
	})
	names := []string{"GREETING", "AWS_LAMBDA_FUNCTION_NAME", "AWS_LAMBDA_FUNCTION_TIMEOUT",
		"AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "AWS_REGION", "AWS_ACCESS_KEY_ID", "HOST_ONLY_SECRET", "TZ"}
	a, err := invokeEcho(context.Background(), p, "env="+strings.Join(names, "&env="))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"GREETING":                        "hello",
		"AWS_LAMBDA_FUNCTION_NAME":        "echo",
		"AWS_LAMBDA_FUNCTION_TIMEOUT":     "2", // rounded up to whole seconds
		"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "256",
		"AWS_REGION":                      DefaultRegion,
		"AWS_ACCESS_KEY_ID":               "local",
		"HOST_ONLY_SECRET":                "",
		"TZ":                              ":UTC",
	}
	for k, v := range want {
		if got := a.Env[k]; got != v {
			t.Errorf("%s: got %q, want %q", k, got, v)
		}
	}
}

func TestPoolFailures(t *testing.T) {
	tests := []struct {
		name     string
		query    string
		wantType string
		replaced bool
	}{
		{name: "handler error keeps the environment", query: "error=1", wantType: "errorString", replaced: false},
		{name: "panic replaces the environment", query: "panic=1", wantType: "string", replaced: true},
		{name: "crash replaces the environment", query: "exit=1", wantType: ErrorTypeExit, replaced: true},
		{name: "timeout replaces the environment", query: "sleep=3s", wantType: ErrorTypeTimeout, replaced: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, _ := newEchoPool(t, func(c *PoolConfig) { c.Function.Timeout = time.Second })
			ctx := context.Background()
			before, err := invokeEcho(ctx, p, "")
			if err != nil {
				t.Fatal(err)
			}
			emulator := p.PIDs()[0]

			start := time.Now()
			_, err = invokeEcho(ctx, p, tt.query)
			var fe *FunctionError
			if !errors.As(err, &fe) {
				t.Fatalf("got error %v, want a *FunctionError", err)
			}
			if fe.Type != tt.wantType || fe.Function != "echo" {
				t.Errorf("got %s error %q, want type %s from echo", fe.Type, fe.Message, tt.wantType)
			}
			if got := fe.Timeout(); got != (tt.wantType == ErrorTypeTimeout) {
				t.Errorf("got Timeout() %v, want %v", got, !got)
			}
			if fe.Timeout() && time.Since(start) > 3*time.Second {
				t.Errorf("timeout took %v, want about the 1s function timeout", time.Since(start))
			}

			after, err := invokeEcho(ctx, p, "")
			if err != nil {
				t.Fatalf("invocation after the failure: %v", err)
			}
			s := p.Stats()
			if tt.replaced {
				if after.PID == before.PID {
					t.Errorf("got the same runtime pid %d after the failure, want a new environment", after.PID)
				}
				if s.Replaced != 1 || s.Started != 2 {
					t.Errorf("got stats %+v, want 1 replaced and 2 started", s)
				}
				// The old emulator is stopped in the background.
				deadline := time.Now().Add(5 * time.Second)
				for alive(emulator) && time.Now().Before(deadline) {
					time.Sleep(20 * time.Millisecond)
				}
				if alive(emulator) || alive(before.PID) {
					t.Errorf("replaced emulator %d or runtime %d still running", emulator, before.PID)
				}
			} else if after.PID != before.PID || s.Replaced != 0 {
				t.Errorf("got runtime pid %d (before %d), stats %+v; want the warm environment kept", after.PID, before.PID, s)
			}
		})
	}
}

func TestPoolConcurrencyAndThrottling(t *testing.T) {
	const n = 4
	p, _ := newEchoPool(t, func(c *PoolConfig) { c.MaxConcurrency = n })
	ctx := context.Background()

	// n concurrent invocations run in n environments; one more is
	// throttled at once while they all sleep.
	var wg sync.WaitGroup
	pids := make(chan int, n)
	errs := make(chan error, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a, err := invokeEcho(ctx, p, "sleep=1500ms")
			if err != nil {
				errs <- err
				return
			}
			pids <- a.PID
		}()
	}
	deadline := time.Now().Add(5 * time.Second)
	for p.Stats().Busy < n && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := invokeEcho(ctx, p, ""); !errors.Is(err, ErrThrottled) {
		t.Errorf("got %v with %d busy environments, want ErrThrottled", err, n)
	}
	wg.Wait()
	close(pids)
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	distinct := map[int]bool{}
	for pid := range pids {
		distinct[pid] = true
	}
	s := p.Stats()
	if len(distinct) != n || s.PeakBusy != n || s.Started != n || s.Throttled != 1 {
		t.Errorf("got %d distinct runtimes, stats %+v; want %d, peak %d, 1 throttled", len(distinct), s, n, n)
	}
}

func TestPoolQueueTimeout(t *testing.T) {
	p, _ := newEchoPool(t, func(c *PoolConfig) {
		c.MaxConcurrency = 1
		c.QueueTimeout = 10 * time.Second
	})
	ctx := context.Background()
	done := make(chan error, 1)
	go func() {
		_, err := invokeEcho(ctx, p, "sleep=300ms")
		done <- err
	}()
	deadline := time.Now().Add(5 * time.Second)
	for p.Stats().Busy < 1 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	// Waits for the busy environment instead of failing.
	if _, err := invokeEcho(ctx, p, ""); err != nil {
		t.Errorf("queued invocation: got %v, want success", err)
	}
	if err := <-done; err != nil {
		t.Error(err)
	}
	if s := p.Stats(); s.Started != 1 || s.Throttled != 0 {
		t.Errorf("got stats %+v, want 1 environment, none throttled", s)
	}
}

func TestPoolInvocationOutlivesContext(t *testing.T) {
	p, _ := newEchoPool(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := invokeEcho(ctx, p, "sleep=1s"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want context.DeadlineExceeded", err)
	}
	if s := p.Stats(); s.Busy != 1 {
		t.Errorf("got %d busy right after the caller gave up, want 1: the invocation runs on", s.Busy)
	}
	// The environment comes back once the invocation ends, and is reused.
	deadline := time.Now().Add(5 * time.Second)
	for p.Stats().Busy > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := invokeEcho(context.Background(), p, ""); err != nil {
		t.Fatal(err)
	}
	if s := p.Stats(); s.Started != 1 || s.Invocations != 2 {
		t.Errorf("got stats %+v, want the one environment reused", s)
	}
}

func TestPoolCloseLeavesNoProcess(t *testing.T) {
	p, _ := newEchoPool(t, func(c *PoolConfig) { c.MaxConcurrency = 3 })
	ctx := context.Background()
	var runtimes []int
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a, err := invokeEcho(ctx, p, "sleep=200ms")
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			runtimes = append(runtimes, a.PID)
			mu.Unlock()
		}()
	}
	wg.Wait()
	// One more invocation is still running when Close is called.
	inflight := make(chan error, 1)
	go func() {
		_, err := invokeEcho(ctx, p, "sleep=30s")
		inflight <- err
	}()
	deadline := time.Now().Add(5 * time.Second)
	for p.Stats().Busy < 1 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	emulators := p.PIDs()
	var all []int
	for _, e := range emulators {
		all = append(all, childPIDs(e)...)
	}
	all = append(all, emulators...)
	if len(emulators) < 2 {
		t.Fatalf("got emulators %v, want at least 2", emulators)
	}

	start := time.Now()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("Close took %v", time.Since(start))
	select {
	case err := <-inflight:
		if err == nil {
			t.Error("in-flight invocation succeeded after Close, want an error")
		}
	case <-time.After(5 * time.Second):
		t.Error("in-flight invocation still waiting 5s after Close")
	}
	for _, pid := range append(all, runtimes...) {
		if alive(pid) {
			t.Errorf("process %d still running after Close", pid)
		}
	}
	if _, err := p.Invoke(ctx, []byte(`{}`)); !errors.Is(err, ErrClosed) {
		t.Errorf("got %v after Close, want ErrClosed", err)
	}
}

func TestNewPoolChecksPaths(t *testing.T) {
	tests := []struct {
		name string
		cfg  PoolConfig
	}{
		{name: "no name", cfg: PoolConfig{RIE: "/bin/sh", Function: Function{Bootstrap: "/bin/sh"}}},
		{name: "no emulator", cfg: PoolConfig{Function: Function{Name: "f", Bootstrap: "/bin/sh"}}},
		{name: "missing bootstrap", cfg: PoolConfig{RIE: "/bin/sh", Function: Function{Name: "f", Bootstrap: "/nonexistent/bootstrap"}}},
		{name: "bootstrap is a directory", cfg: PoolConfig{RIE: "/bin/sh", Function: Function{Name: "f", Bootstrap: os.TempDir()}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := NewPool(tt.cfg); !errors.Is(err, ErrStart) {
				t.Errorf("got %v, want ErrStart", err)
			}
		})
	}
}
