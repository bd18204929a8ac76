package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
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

// patience bounds the tests' waits for real processes to start, stop or
// change state. It is generous because a machine busy with a parallel test
// run can take seconds to schedule a process; a wait that succeeds returns
// as soon as it does, so a fast machine never waits for it.
const patience = time.Minute

// eventually polls cond until it holds, and fails the test if it still
// does not after patience.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: still not so after %v", what, patience)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// newHold returns echofn's hold query, which keeps an invocation running
// until release is called, and release. The test's end releases too.
func newHold(t *testing.T) (query string, release func()) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "release")
	release = func() {
		if err := os.WriteFile(path, nil, 0o600); err != nil {
			t.Error(err)
		}
	}
	t.Cleanup(release)
	return "hold=" + url.QueryEscape(path), release
}

// heldTimeout is the function timeout of pools whose invocations a test
// holds: far beyond any hold, so that only the test ends one.
const heldTimeout = time.Minute

// Tests of a function timeout use failTimeout, and a function that sleeps
// 30 times longer (sleepPastTimeout), so that only the timeout can end it.
// Under the emulator a cold start counts toward the first invocation's
// timeout, so failTimeout also bounds the start of an environment: a
// race-built echofn took up to 1.9 s to start under stress --cpu 4, and a
// 1 s timeout failed the invocation after a replacement.
const (
	failTimeout      = 5 * time.Second
	sleepPastTimeout = "sleep=150s"
)

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
		{name: "timeout replaces the environment", query: sleepPastTimeout, wantType: ErrorTypeTimeout, replaced: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, _ := newEchoPool(t, func(c *PoolConfig) { c.Function.Timeout = failTimeout })
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
			// The function sleeps 30 times the timeout: the timeout cut it
			// short.
			if took := time.Since(start); fe.Timeout() && took >= 30*failTimeout {
				t.Errorf("timeout took %v, want the %v function timeout to cut the sleep short", took, failTimeout)
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
				eventually(t, fmt.Sprintf("replaced emulator %d and runtime %d stopped", emulator, before.PID), func() bool {
					return !alive(emulator) && !alive(before.PID)
				})
			} else if after.PID != before.PID || s.Replaced != 0 {
				t.Errorf("got runtime pid %d (before %d), stats %+v; want the warm environment kept", after.PID, before.PID, s)
			}
		})
	}
}

func TestPoolConcurrencyAndThrottling(t *testing.T) {
	const n = 4
	p, _ := newEchoPool(t, func(c *PoolConfig) {
		c.MaxConcurrency = n
		c.Function.Timeout = heldTimeout
	})
	ctx := context.Background()
	hold, release := newHold(t)

	// n concurrent invocations run in n environments; one more is
	// throttled at once while they are all held.
	var wg sync.WaitGroup
	pids := make(chan int, n)
	errs := make(chan error, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a, err := invokeEcho(ctx, p, hold)
			if err != nil {
				errs <- err
				return
			}
			pids <- a.PID
		}()
	}
	eventually(t, fmt.Sprintf("%d invocations busy", n), func() bool { return p.Stats().Busy == n })
	if _, err := invokeEcho(ctx, p, ""); !errors.Is(err, ErrThrottled) {
		t.Errorf("got %v with %d busy environments, want ErrThrottled", err, n)
	}
	release()
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
		c.QueueTimeout = patience
		c.Function.Timeout = heldTimeout
	})
	ctx := context.Background()
	hold, release := newHold(t)
	done := make(chan error, 1)
	go func() {
		_, err := invokeEcho(ctx, p, hold)
		done <- err
	}()
	eventually(t, "the first invocation busy", func() bool { return p.Stats().Busy == 1 })
	// The second waits for the busy environment instead of failing.
	queued := make(chan error, 1)
	go func() {
		_, err := invokeEcho(ctx, p, "")
		queued <- err
	}()
	eventually(t, "the second invocation queued", func() bool { return p.Stats().Queued == 1 })
	release()
	if err := <-queued; err != nil {
		t.Errorf("queued invocation: got %v, want success", err)
	}
	if err := <-done; err != nil {
		t.Error(err)
	}
	if s := p.Stats(); s.Started != 1 || s.Throttled != 0 || s.Invocations != 2 {
		t.Errorf("got stats %+v, want 1 environment, 2 invocations, none throttled", s)
	}
}

func TestPoolInvocationOutlivesContext(t *testing.T) {
	p, _ := newEchoPool(t, func(c *PoolConfig) { c.Function.Timeout = heldTimeout })
	// A warm environment first: the context below ends while the
	// invocation runs, not while the emulator starts.
	if _, err := invokeEcho(context.Background(), p, ""); err != nil {
		t.Fatal(err)
	}
	hold, release := newHold(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		// Busy counts the invocation from the moment it has an
		// environment; from then on it runs whatever ctx does.
		for p.Stats().Busy == 0 && ctx.Err() == nil {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	if _, err := invokeEcho(ctx, p, hold); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	if s := p.Stats(); s.Busy != 1 {
		t.Errorf("got %d busy right after the caller gave up, want 1: the invocation runs on", s.Busy)
	}
	// The environment comes back once the invocation ends, and is reused.
	release()
	eventually(t, "the held invocation ended", func() bool { return p.Stats().Busy == 0 })
	if _, err := invokeEcho(context.Background(), p, ""); err != nil {
		t.Fatal(err)
	}
	if s := p.Stats(); s.Started != 1 || s.Invocations != 3 {
		t.Errorf("got stats %+v, want the one environment reused", s)
	}
}

// TestPoolStartErrorWrapsContext checks that an environment start cut
// short by the caller's context says so and wraps the context's error,
// instead of blaming the emulator.
func TestPoolStartErrorWrapsContext(t *testing.T) {
	p, _ := newEchoPool(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	e, err := startEnvironment(ctx, &p.cfg, p.environ, p.out, 1)
	if err == nil {
		e.stop()
		t.Fatal("started an environment with a cancelled context")
	}
	if !errors.Is(err, context.Canceled) || !errors.Is(err, ErrStart) {
		t.Errorf("got %v, want ErrStart wrapping context.Canceled", err)
	}
	if !strings.Contains(err.Error(), "caller gave up") {
		t.Errorf("got %q, want it to say the caller gave up", err)
	}
}

func TestPoolCloseLeavesNoProcess(t *testing.T) {
	p, _ := newEchoPool(t, func(c *PoolConfig) {
		c.MaxConcurrency = 3
		c.Function.Timeout = heldTimeout
	})
	ctx := context.Background()
	// Two invocations held together run in two environments.
	hold, release := newHold(t)
	var runtimes []int
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a, err := invokeEcho(ctx, p, hold)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			runtimes = append(runtimes, a.PID)
			mu.Unlock()
		}()
	}
	eventually(t, "2 invocations busy", func() bool { return p.Stats().Busy == 2 })
	release()
	wg.Wait()
	// One more invocation is still running, held, when Close is called.
	forever, _ := newHold(t)
	inflight := make(chan error, 1)
	go func() {
		_, err := invokeEcho(ctx, p, forever)
		inflight <- err
	}()
	eventually(t, "1 invocation busy", func() bool { return p.Stats().Busy == 1 })
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
	// Close waits for the processes to exit; the invocation's answer
	// follows at once.
	select {
	case err := <-inflight:
		if err == nil {
			t.Error("in-flight invocation succeeded after Close, want an error")
		}
	case <-time.After(patience):
		t.Errorf("in-flight invocation still waiting %v after Close", patience)
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
