package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lambda-dedupe/dedupe/infra"
	"github.com/lambda-dedupe/dedupe/internal/goflavour"
	"github.com/lambda-dedupe/dedupe/localtest/gateway"
)

// Built once by TestMain: this command, and the gateway's echofn test
// function as every function's bootstrap (these tests are about processes
// and wiring, not about the functions).
var testBin, testBootstraps string

func TestMain(m *testing.M) {
	os.Exit(buildAndRun(m))
}

func buildAndRun(m *testing.M) int {
	root, err := infra.ModuleRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	dir, err := os.MkdirTemp("", "local-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	testBin = filepath.Join(dir, "local")
	// Built in this test binary's flavour (-race under make test), from
	// the packages go test compiled for the test itself.
	own := goflavour.Own()
	build := exec.Command("go", append(append([]string{"build"}, own.Args()...), "-o", testBin, ".")...)
	build.Env = append(os.Environ(), own.Env()...)
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		return 1
	}
	// The functions are echofn, static (test scaffolding, not under
	// test), built once and linked under both names.
	testBootstraps = filepath.Join(dir, "bootstraps")
	echo := filepath.Join(dir, "echofn")
	if err := gateway.BuildStaticBootstrap(context.Background(), root, "./localtest/gateway/testdata/echofn", echo); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for _, name := range []string{"api", "reaper"} {
		if err := os.MkdirAll(filepath.Join(testBootstraps, name), 0o755); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if err := os.Link(echo, filepath.Join(testBootstraps, name, "bootstrap")); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return m.Run()
}

// needDynalite skips (or, under CI, fails) when dynalite is not installed.
func needDynalite(t *testing.T) {
	t.Helper()
	root, _ := infra.ModuleRoot()
	if _, err := os.Stat(filepath.Join(root, "localtest", "node_modules", ".bin", "dynalite")); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("dynalite not installed (run `npm ci --prefix localtest`): %v", err)
		}
		t.Skipf("dynalite not installed (run `npm ci --prefix localtest`): %v", err)
	}
}

// descendants returns every process below pid, read from /proc.
func descendants(pid int) []int {
	parent := map[int]int{}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, path := range stats {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(b, ')')
		f := bytes.Fields(b[i+1:])
		if i < 0 || len(f) < 2 {
			continue
		}
		p, _ := strconv.Atoi(filepath.Base(filepath.Dir(path)))
		pp, _ := strconv.Atoi(string(f[1]))
		parent[p] = pp
	}
	var out []int
	for p := range parent {
		for a := parent[p]; a > 1; a = parent[a] {
			if a == pid {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

// patience bounds each wait for the command's processes: generous, since a
// machine busy with a parallel test run can take many seconds to start
// dynalite and the emulators. A wait returns as soon as its event happens.
const patience = 3 * time.Minute

// eventuallyGone waits until none of pids is alive or timeout passes. A
// process that has closed its output may still be exiting.
func eventuallyGone(pids []int, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		n := 0
		for _, pid := range pids {
			if alive(pid) {
				n++
			}
		}
		if n == 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || !bytes.HasPrefix(bytes.TrimSpace(b[i+1:]), []byte("Z"))
}

// syncBuffer collects the command's output.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func TestSignalLeavesNoProcess(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs /proc to list child processes")
	}
	needDynalite(t)
	tests := []struct {
		name      string
		sig       os.Signal
		viaParent bool // start under a shell and SIGKILL the shell, as when `go run` is killed
	}{
		{name: "Ctrl-C", sig: syscall.SIGINT},
		{name: "SIGTERM", sig: syscall.SIGTERM},
		{name: "parent killed", sig: syscall.SIGKILL, viaParent: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { runAndStop(t, tt.sig, tt.viaParent) })
	}
}

// runAndStop starts the command, checks that it serves, runs the schedule
// and started its processes, then sends sig and checks that it exits
// cleanly and no process it started is left. With viaParent, the command
// runs under a shell, and sig goes to the shell.
func runAndStop(t *testing.T, sig os.Signal, viaParent bool) {
	args := []string{"-port", "0", "-build-dir", testBootstraps, "-reaper-interval", "200ms"}
	cmd := exec.Command(testBin, args...)
	if viaParent {
		// "; exit" keeps the shell from exec'ing the command in its place.
		cmd = exec.Command("/bin/sh", "-c", `"$0" "$@"; exit $?`, testBin)
		cmd.Args = append(cmd.Args, args...)
	}
	cmd.Env = append(os.Environ(), "AWS_ENDPOINT_URL_DYNAMODB=") // start dynalite itself
	// Through an io.Pipe, Wait waits until every process holding the
	// output closed it, so a command whose shell was killed keeps its
	// stdout (no SIGPIPE) until it exits itself.
	stdout, pw := io.Pipe()
	cmd.Stdout = pw
	cmd.WaitDelay = 30 * time.Second
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	var out syncBuffer
	base := make(chan string, 1)
	scheduled := make(chan struct{}, 1)
	go func() {
		urlRE := regexp.MustCompile(`API Gateway \(HTTP API\)\s+(http://\S+)`)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(&out, line)
			if m := urlRE.FindStringSubmatch(line); m != nil {
				base <- m[1]
			}
			if strings.HasPrefix(line, "[ReaperFunction#1] cold start") {
				scheduled <- struct{}{}
			}
		}
		io.Copy(io.Discard, stdout)
	}()

	var url string
	select {
	case url = <-base:
	case <-time.After(patience):
		t.Fatalf("no banner after %v\nstdout:\n%s\nstderr:\n%s", patience, out.String(), stderr.String())
	}
	// The template's routes are behind AWS_IAM: sign as curl --aws-sigv4 does.
	req, err := http.NewRequest("POST", url+"/payments", strings.NewReader(`{"amount":1}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=alice/20260101/us-east-1/execute-api/aws4_request, SignedHeaders=host;x-amz-date, Signature=00")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("POST /payments: got %d, want 200 from the stand-in function", resp.StatusCode)
	}
	select {
	case <-scheduled:
	case <-time.After(patience):
		t.Errorf("the scheduled function did not run within %v\n%s", patience, out.String())
	}

	kids := descendants(cmd.Process.Pid)
	var names []string
	for _, pid := range kids {
		comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		names = append(names, strings.ReplaceAll(string(comm), "\x00", " "))
	}
	joined := strings.Join(names, "\n")
	for _, want := range []string{"dynalite", "aws-lambda-rie", "api/bootstrap", "reaper/bootstrap"} {
		if !strings.Contains(joined, want) {
			t.Errorf("no %s among the child processes:\n%s", want, joined)
		}
	}

	start := time.Now()
	if err := cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() {
		err := cmd.Wait()
		pw.Close()
		waited <- err
	}()
	select {
	case err := <-waited:
		if err != nil && !viaParent { // the killed shell's status is not the command's

			t.Errorf("exit: %v\nstderr:\n%s", err, stderr.String())
		}
	case <-time.After(patience):
		t.Fatalf("still running %v after %v\n%s", patience, sig, out.String())
	}
	t.Logf("stopped %d child processes in %v", len(kids), time.Since(start))
	eventuallyGone(kids, patience)
	for i, pid := range kids {
		if alive(pid) {
			t.Errorf("process %d (%s) still running after exit", pid, names[i])
		}
	}
	if !strings.Contains(out.String(), "stopped") {
		t.Errorf("got output without the final \"stopped\":\n%s", out.String())
	}
}

func TestMissingBootstraps(t *testing.T) {
	cmd := exec.Command(testBin, "-port", "0", "-build-dir", t.TempDir())
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("got success, want an error\n%s", out)
	}
	for _, want := range []string{"missing bootstrap", "api/bootstrap", "reaper/bootstrap", "make build-local"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("got %q, want it to mention %q", out, want)
		}
	}
}
