// Package proc provides what the test rig's server packages (redistest,
// pgtest, dynalite, moto) share: starting a server process in its own
// process group, that dies with its parent on Linux, keeping the tail of
// its output, stopping it, a free port, and a DynamoDB readiness ping.
package proc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// User is a user and group id to run a server as.
type User struct {
	Uid, Gid uint32
}

// Process is one running server process.
type Process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd.Wait has returned
	err  error         // cmd.Wait's result; read only after done is closed
	log  *Tail
}

// Start starts cmd in a new process group (on Linux, killed when this
// process dies), with its output kept in a Tail and copied to out when out
// is not nil. as, when not nil, runs it as that user (unix only).
func Start(cmd *exec.Cmd, out io.Writer, as *User) (*Process, error) {
	p := &Process{cmd: cmd, done: make(chan struct{}), log: &Tail{}}
	var w io.Writer = p.log
	if out != nil {
		w = io.MultiWriter(p.log, out)
	}
	cmd.Stdout, cmd.Stderr = w, w
	cmd.SysProcAttr = sysProcAttr(as)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Err returns how the process exited; call it only after Done is closed.
func (p *Process) Err() error { return p.err }

// Log returns the tail of the process's output.
func (p *Process) Log() *Tail { return p.log }

// Stop sends sig to the process (not its group, so that a server may shut
// its children down in order), then SIGKILL to the group after grace, and
// waits for the process to exit.
func (p *Process) Stop(sig syscall.Signal, grace time.Duration) {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(sig)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
		killGroup(p.cmd.Process.Pid)
		<-p.done
	}
	// Children left behind (none, normally) go with the group.
	killGroup(p.cmd.Process.Pid)
}

// FreePort returns a TCP port that was free on 127.0.0.1 a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pick a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Tail keeps the last few kilobytes written to it.
type Tail struct {
	mu  sync.Mutex
	buf []byte
}

const tailSize = 4096

// Write implements io.Writer.
func (t *Tail) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	if over := len(t.buf) - tailSize; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(b), nil
}

// String returns what was kept.
func (t *Tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// Quote returns the kept output as an error-message suffix naming what
// wrote it, or "" when there is none.
func (t *Tail) Quote(what string) string {
	s := strings.TrimSpace(t.String())
	if s == "" {
		return ""
	}
	return "\n" + what + " output:\n" + s
}

// PingDynamoDB sends one DynamoDB ListTables request to endpoint with dummy
// credentials and checks that the answer is a DynamoDB one. Local servers
// (dynalite, moto) check at most that a signature is present, never that
// it is valid.
func PingDynamoDB(ctx context.Context, client *http.Client, endpoint string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint+"/", strings.NewReader("{}"))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	req.Header.Set("X-Amz-Target", "DynamoDB_20120810.ListTables")
	req.Header.Set("X-Amz-Date", time.Now().UTC().Format("20060102T150405Z"))
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=local/20000101/us-east-1/dynamodb/aws4_request, SignedHeaders=host, Signature=0")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte(`"TableNames"`)) {
		return fmt.Errorf("ListTables: %s: %s", resp.Status, body)
	}
	return nil
}

// errWaitTimeout is the cause of WaitDynamoDB's own deadline.
var errWaitTimeout = errors.New("wait timeout")

// WaitDynamoDB polls endpoint with PingDynamoDB until it answers, the
// server's process exits (done is closed), ctx ends or timeout passes. A
// request to a port that accepts but never answers does not outlast the
// process: it ends as soon as the process exits.
//
// When ctx ends first, the error says that the caller gave up and wraps
// ctx's error; when timeout passes, it says the server did not answer in
// time.
func WaitDynamoDB(ctx context.Context, endpoint string, timeout time.Duration, done <-chan struct{}) error {
	start := time.Now()
	parent := ctx
	ctx, cancel := context.WithTimeoutCause(ctx, timeout, errWaitTimeout)
	defer cancel()
	reqCtx, cancelReq := context.WithCancel(ctx)
	defer cancelReq()
	go func() {
		select {
		case <-done:
			cancelReq()
		case <-reqCtx.Done():
		}
	}()
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 5 * time.Second}

	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		if last = PingDynamoDB(reqCtx, client, endpoint); last == nil {
			return nil
		}
		select {
		case <-done:
			return errors.New("process exited while starting")
		case <-ctx.Done():
			if parent.Err() != nil {
				return fmt.Errorf("not answering yet when the caller gave up after %v (last request: %v): %w",
					time.Since(start).Round(time.Millisecond), last, context.Cause(parent))
			}
			return fmt.Errorf("not answering after %v (last request: %v)", timeout, last)
		case <-tick.C:
		}
	}
}
