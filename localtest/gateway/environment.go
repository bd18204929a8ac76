package gateway

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// invokePath is the emulator's invoke endpoint, the Lambda Invoke API path
// with the function name fixed to "function".
const invokePath = "/2015-03-31/functions/function/invocations"

// stopGrace is how long an emulator gets to stop its runtime and exit after
// SIGTERM before it and its runtime are killed.
const stopGrace = 3 * time.Second

// environment is one execution environment: one emulator process running
// one bootstrap, serving one invocation at a time.
type environment struct {
	name    string // function#n
	cmd     *exec.Cmd
	addr    string // the emulator's invoke address, host:port
	runtime string // the emulator's Runtime API address, host:port
	client  *http.Client
	timeout time.Duration // the function's timeout
	out     *lineWriter

	done    chan struct{} // closed when the emulator process has exited
	waitErr error         // cmd.Wait's result; read after done is closed

	stopOnce sync.Once
	spawned  time.Time // when the emulator process started
	cold     bool      // no invocation has finished yet; guarded by the pool
}

// startEnvironment starts an emulator for the pool's function and waits
// until it accepts connections. The bootstrap itself starts on the first
// invocation, as a Lambda cold start does.
func startEnvironment(ctx context.Context, c *PoolConfig, environ []string, out io.Writer, n int) (*environment, error) {
	name := fmt.Sprintf("%s#%d", c.Function.Name, n)
	var lastErr error
	// A port found free can be taken before the emulator binds it; the
	// emulator then exits at once, and another pair of ports is tried.
	for attempt := 0; attempt < 3; attempt++ {
		e, err := tryStart(ctx, c, environ, out, name)
		if err == nil {
			return e, nil
		}
		lastErr = err
		if ctx.Err() != nil {
			break
		}
	}
	// lastErr is wrapped too: when ctx ended, errors.Is finds its error.
	return nil, fmt.Errorf("%w %s: %w", ErrStart, name, lastErr)
}

// tryStart makes one attempt of startEnvironment.
func tryStart(ctx context.Context, c *PoolConfig, environ []string, out io.Writer, name string) (*environment, error) {
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	e := &environment{
		name:    name,
		addr:    "127.0.0.1:" + strconv.Itoa(ports[0]),
		runtime: "127.0.0.1:" + strconv.Itoa(ports[1]),
		timeout: c.Function.Timeout,
		done:    make(chan struct{}),
		cold:    true,
	}
	e.client = &http.Client{
		Transport: &http.Transport{
			Proxy:               nil,
			MaxIdleConnsPerHost: 1,
			DisableCompression:  true,
		},
		// The emulator ends an invocation at the function's timeout; this
		// bound only catches an emulator that hangs.
		Timeout: c.Function.Timeout + 10*time.Second,
	}
	drop := emulatorNoise
	if c.Verbose {
		drop = nil
	}
	e.out = &lineWriter{out: out, prefix: "[" + name + "] ", drop: drop}

	bootstrap := c.Function.Bootstrap
	e.cmd = exec.Command(c.RIE,
		"--log-level", "error",
		"--runtime-interface-emulator-address", e.addr,
		"--runtime-api-address", e.runtime,
		bootstrap,
	)
	e.cmd.Dir = filepath.Dir(bootstrap)
	e.cmd.Env = environ
	e.cmd.Stdout = e.out
	e.cmd.Stderr = e.out
	// The runtime inherits the output pipe; if it outlives the emulator,
	// Wait must not block on it forever.
	e.cmd.WaitDelay = time.Second
	setProcessGroup(e.cmd)
	e.spawned = time.Now()
	if err := e.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		e.waitErr = e.cmd.Wait()
		e.out.Flush()
		close(e.done)
	}()

	if err := e.waitListening(ctx, c.StartTimeout); err != nil {
		e.stop()
		return nil, err
	}
	return e, nil
}

// waitListening polls the emulator's two addresses until both accept a
// connection, the process exits, ctx ends or timeout passes. The Runtime
// API must listen too: the emulator starts the bootstrap on the first
// invocation, and on a busy machine a bootstrap started before the Runtime
// API listened found its port closed and exited (Init failed). When ctx ends
// first, the error wraps ctx's error: the caller gave up, the emulator did
// not fail.
func (e *environment) waitListening(ctx context.Context, timeout time.Duration) error {
	start := time.Now()
	wait, cancel := context.WithTimeoutCause(ctx, timeout, errStartTimeout)
	defer cancel()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	var d net.Dialer
	listening := func(addr string) error {
		conn, err := d.DialContext(wait, "tcp", addr)
		if err == nil {
			conn.Close()
		}
		return err
	}
	for {
		err := listening(e.addr)
		if err == nil {
			if err = listening(e.runtime); err == nil {
				return nil
			}
		}
		select {
		case <-e.done:
			return fmt.Errorf("emulator exited while starting: %v", e.waitErr)
		case <-wait.Done():
			if cerr := ctx.Err(); cerr != nil {
				return fmt.Errorf("emulator not yet listening on %s when the caller gave up after %v: %w",
					e.addr, time.Since(start).Round(time.Millisecond), context.Cause(ctx))
			}
			return fmt.Errorf("emulator not listening on %s after %v (the pool's StartTimeout): %v", e.addr, timeout, err)
		case <-tick.C:
		}
	}
}

// errStartTimeout is the cause of waitListening's own deadline.
var errStartTimeout = errors.New("start timeout")

// exited reports whether the emulator process has exited.
func (e *environment) exited() bool {
	select {
	case <-e.done:
		return true
	default:
		return false
	}
}

// stop ends the environment: SIGTERM to the emulator, which stops its
// runtime and exits; after stopGrace, SIGKILL to the emulator and to the
// runtimes it started. It waits until the emulator has exited. Calling stop
// again does nothing.
func (e *environment) stop() {
	e.stopOnce.Do(func() {
		pid := e.cmd.Process.Pid
		kids := childPIDs(pid)
		_ = signalGroup(pid, false)
		t := time.NewTimer(stopGrace)
		defer t.Stop()
		select {
		case <-e.done:
		case <-t.C:
			_ = signalGroup(pid, true)
			// The emulator puts each runtime in a group of its own.
			for _, kid := range kids {
				_ = signalGroup(kid, true)
			}
			<-e.done
		}
		e.client.CloseIdleConnections()
	})
}

// invoke runs one invocation and classifies its outcome. reuse reports
// whether the environment may serve another invocation: false after a
// timeout, a crash or an emulator failure, so that the pool replaces it.
func (e *environment) invoke(function string, payload []byte) (result []byte, reuse bool, err error) {
	req, err := http.NewRequest(http.MethodPost, "http://"+e.addr+invokePath, bytes.NewReader(payload))
	if err != nil {
		return nil, false, err
	}
	req.Header.Set("X-Amzn-RequestId", newUUID())
	resp, err := e.client.Do(req)
	if err != nil {
		return nil, false, &FunctionError{Function: function, Type: ErrorTypeEnvironment, Message: err.Error()}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, false, &FunctionError{Function: function, Type: ErrorTypeEnvironment, Message: err.Error()}
	}
	switch resp.StatusCode {
	case http.StatusOK:
		// The emulator answers a timeout with 200 and a plain-text body,
		// after it has killed the runtime.
		if bytes.HasPrefix(body, []byte("Task timed out after ")) {
			return nil, false, &FunctionError{Function: function, Type: ErrorTypeTimeout, Message: string(body)}
		}
		// A handler error arrives as 200 with the error object as the
		// body (the emulator drops X-Amz-Function-Error). The runtime
		// stays up, as in Lambda.
		if fe, ok := parseFunctionError(function, body); ok {
			return nil, true, fe
		}
		return body, true, nil
	case http.StatusBadGateway:
		// The runtime exited: a Go handler that panics reports the panic,
		// then exits; a crash reports Runtime.ExitError.
		if fe, ok := parseFunctionError(function, body); ok {
			return nil, false, fe
		}
		return nil, false, &FunctionError{Function: function, Type: ErrorTypeExit, Message: strings.TrimSpace(string(body))}
	default:
		return nil, false, &FunctionError{Function: function, Type: ErrorTypeEnvironment,
			Message: fmt.Sprintf("emulator answered %s: %s", resp.Status, bytes.TrimSpace(body))}
	}
}

// parseFunctionError recognises the error object the runtime reports,
// {"errorMessage": ..., "errorType": ..., "stackTrace": [...]}: a JSON object
// with both fields and no other fields but stackTrace.
func parseFunctionError(function string, body []byte) (*FunctionError, bool) {
	var obj map[string]json.RawMessage
	if json.Unmarshal(body, &obj) != nil {
		return nil, false
	}
	var fe struct {
		Message *string `json:"errorMessage"`
		Type    *string `json:"errorType"`
	}
	if json.Unmarshal(body, &fe) != nil || fe.Message == nil || fe.Type == nil {
		return nil, false
	}
	for k := range obj {
		if k != "errorMessage" && k != "errorType" && k != "stackTrace" {
			return nil, false
		}
	}
	return &FunctionError{Function: function, Type: *fe.Type, Message: *fe.Message}, true
}

// freePorts returns n distinct TCP ports that were free on 127.0.0.1 a
// moment ago.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("pick a free port: %w", err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// newUUID returns a random (version 4) UUID, the form of Lambda request ids.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
