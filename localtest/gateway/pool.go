package gateway

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"time"
)

// Defaults for the zero values of PoolConfig and Function.
const (
	// DefaultMaxConcurrency is the number of execution environments a pool
	// runs at most when PoolConfig.MaxConcurrency is zero.
	DefaultMaxConcurrency = 16

	// DefaultStartTimeout bounds how long an environment may take to start
	// listening when PoolConfig.StartTimeout is zero. It is generous: a
	// machine busy with a parallel test run can take seconds to start a
	// process, and a caller that wants less bounds Invoke's context.
	DefaultStartTimeout = 30 * time.Second

	// DefaultTimeout is Lambda's default function timeout, used when
	// Function.Timeout is zero.
	DefaultTimeout = 3 * time.Second

	// DefaultMemoryMB is Lambda's default memory size, used when
	// Function.MemoryMB is zero. The emulator only reports it.
	DefaultMemoryMB = 128

	// DefaultRegion is the AWS region the functions see when their
	// environment names none.
	DefaultRegion = "us-east-1"
)

// Function describes one Lambda function: what a template declares for it.
type Function struct {
	// Name is the function's name, such as the template's logical id
	// "ApiFunction". It prefixes the function's log lines and is the
	// AWS_LAMBDA_FUNCTION_NAME the function sees.
	Name string

	// Bootstrap is the path of the function's executable, built for the
	// local operating system and architecture. Its directory becomes the
	// working directory and LAMBDA_TASK_ROOT, as /var/task is in Lambda.
	Bootstrap string

	// Timeout is the function's timeout. The emulator works in whole
	// seconds, so it is rounded up. Zero means DefaultTimeout.
	Timeout time.Duration

	// MemoryMB is the function's memory size. Zero means DefaultMemoryMB.
	MemoryMB int

	// Env is the function's environment. The runtime sees exactly these
	// variables, plus PATH, TZ, dummy AWS credentials and region (unless
	// Env sets them) and Lambda's reserved AWS_LAMBDA_* variables; it does
	// not inherit the caller's environment, so real credentials never
	// reach a local function.
	Env map[string]string
}

// PoolConfig configures a [Pool].
type PoolConfig struct {
	// RIE is the path of the aws-lambda-rie executable. Required.
	RIE string

	// Function is the function the pool runs. Name and Bootstrap are
	// required.
	Function Function

	// MaxConcurrency is the largest number of execution environments, and
	// so of concurrent invocations. Zero means DefaultMaxConcurrency.
	MaxConcurrency int

	// QueueTimeout is how long an invocation waits for an environment to
	// become free when MaxConcurrency environments are all busy, before it
	// fails with ErrThrottled. Zero means it fails at once, as Lambda
	// throttles at once; a positive wait suits load tests that send more
	// concurrent requests than a laptop should run environments for.
	QueueTimeout time.Duration

	// StartTimeout bounds how long an environment may take to start
	// listening. Zero means DefaultStartTimeout.
	StartTimeout time.Duration

	// Output receives the functions' and the emulator's output, one line at
	// a time, each prefixed with "[Name#n] " (n numbers the pool's
	// environments), and the pool's own notes about cold starts, timeouts
	// and replaced environments. Nil discards them.
	Output io.Writer

	// Verbose keeps the START, END and REPORT lines the emulator prints
	// around every invocation; they are dropped otherwise.
	Verbose bool
}

// Stats counts what a pool did. Durations are wall-clock time.
type Stats struct {
	// Started is the number of environments started so far.
	Started int
	// Live is the number of environments running now, busy or idle.
	Live int
	// Busy is the number of invocations running now.
	Busy int
	// Queued is the number of invocations waiting now for a busy
	// environment to free up (see PoolConfig.QueueTimeout).
	Queued int
	// PeakBusy is the largest number of concurrent invocations so far,
	// each in its own environment.
	PeakBusy int
	// Invocations is the number of invocations that ran.
	Invocations int
	// Throttled is the number of invocations refused with ErrThrottled.
	Throttled int
	// Replaced is the number of environments discarded after a timeout, a
	// crash or an emulator failure.
	Replaced int
	// ColdStarts is the number of first invocations of an environment,
	// and ColdStartMax and ColdStartTotal their longest and summed
	// latency: emulator start, runtime init and the invocation itself.
	ColdStarts     int
	ColdStartMax   time.Duration
	ColdStartTotal time.Duration
}

// Pool runs one function's execution environments. Its methods are safe for
// concurrent use. Close it to stop every environment.
type Pool struct {
	cfg     PoolConfig
	environ []string
	out     io.Writer

	mu     sync.Mutex
	idle   []*environment // most recently used last
	all    map[*environment]bool
	live   int // environments started or starting, not yet discarded
	n      int // environments numbered so far
	closed bool
	freed  chan struct{} // closed, and replaced, when an environment frees up
	stats  Stats

	bg sync.WaitGroup // invocations and teardowns still running
}

// NewPool checks cfg and returns a pool that starts environments on demand:
// none runs until the first invocation.
func NewPool(cfg PoolConfig) (*Pool, error) {
	if cfg.Function.Name == "" {
		return nil, fmt.Errorf("%w: function without a name", ErrStart)
	}
	for what, path := range map[string]*string{"emulator": &cfg.RIE, "bootstrap of " + cfg.Function.Name: &cfg.Function.Bootstrap} {
		if *path == "" {
			return nil, fmt.Errorf("%w: no %s given", ErrStart, what)
		}
		abs, err := filepath.Abs(*path)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrStart, what, err)
		}
		fi, err := os.Stat(abs)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrStart, what, err)
		}
		if fi.IsDir() || fi.Mode()&0o111 == 0 {
			return nil, fmt.Errorf("%w: %s %s is not an executable file", ErrStart, what, abs)
		}
		*path = abs
	}
	if cfg.MaxConcurrency <= 0 {
		cfg.MaxConcurrency = DefaultMaxConcurrency
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = DefaultStartTimeout
	}
	if cfg.Function.Timeout <= 0 {
		cfg.Function.Timeout = DefaultTimeout
	}
	cfg.Function.Timeout = time.Duration(math.Ceil(cfg.Function.Timeout.Seconds())) * time.Second
	if cfg.Function.MemoryMB <= 0 {
		cfg.Function.MemoryMB = DefaultMemoryMB
	}
	var out io.Writer = io.Discard
	if cfg.Output != nil {
		out = &syncWriter{w: cfg.Output}
	}
	return &Pool{
		cfg:     cfg,
		environ: environ(&cfg.Function),
		out:     out,
		all:     map[*environment]bool{},
		freed:   make(chan struct{}),
	}, nil
}

// environ returns the environment of f's emulator, which passes it on to
// the runtime.
func environ(f *Function) []string {
	vars := map[string]string{
		"PATH":                      os.Getenv("PATH"),
		"TZ":                        ":UTC",
		"LANG":                      "en_US.UTF-8",
		"AWS_REGION":                DefaultRegion,
		"AWS_DEFAULT_REGION":        DefaultRegion,
		"AWS_ACCESS_KEY_ID":         "local",
		"AWS_SECRET_ACCESS_KEY":     "local",
		"AWS_EC2_METADATA_DISABLED": "true",
		// Keep the user's ~/.aws profiles out of the functions.
		"AWS_CONFIG_FILE":             os.DevNull,
		"AWS_SHARED_CREDENTIALS_FILE": os.DevNull,
	}
	for k, v := range f.Env {
		vars[k] = v
	}
	if r, ok := f.Env["AWS_REGION"]; ok {
		if _, ok := f.Env["AWS_DEFAULT_REGION"]; !ok {
			vars["AWS_DEFAULT_REGION"] = r
		}
	}
	// Reserved, as in Lambda: Env cannot override them.
	for k, v := range map[string]string{
		"AWS_LAMBDA_FUNCTION_NAME":        f.Name,
		"AWS_LAMBDA_FUNCTION_TIMEOUT":     strconv.Itoa(int(f.Timeout / time.Second)),
		"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": strconv.Itoa(f.MemoryMB),
		"AWS_LAMBDA_FUNCTION_VERSION":     "$LATEST",
		"AWS_LAMBDA_LOG_GROUP_NAME":       "/aws/lambda/" + f.Name,
		"AWS_LAMBDA_LOG_STREAM_NAME":      "local",
		"AWS_EXECUTION_ENV":               "AWS_Lambda_provided.al2023",
		"LAMBDA_TASK_ROOT":                filepath.Dir(f.Bootstrap),
		"_HANDLER":                        "bootstrap",
	} {
		vars[k] = v
	}
	list := make([]string, 0, len(vars))
	for k, v := range vars {
		list = append(list, k+"="+v)
	}
	sort.Strings(list)
	return list
}

// Name returns the name of the pool's function.
func (p *Pool) Name() string {
	return p.cfg.Function.Name
}

// Invoke runs one synchronous invocation with payload as the event and
// returns the function's result. It takes a warm idle environment, or
// starts a new one when all are busy and the pool is below its concurrency
// limit; otherwise it waits up to the queue timeout, then fails with
// ErrThrottled.
//
// When the function returns an error, panics, crashes or times out, Invoke
// returns a *FunctionError. An environment whose runtime crashed or timed
// out, or whose emulator failed, is stopped and replaced by a fresh one on
// a later invocation; one whose handler returned an error stays warm.
//
// ctx bounds the wait for an environment and for the result. Once the
// invocation has started it runs to completion, as in Lambda, even if ctx
// ends and Invoke returns ctx's error early; the environment is busy until
// then. Close stops it.
func (p *Pool) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	e, err := p.acquire(ctx)
	if err != nil {
		return nil, err
	}
	type outcome struct {
		result []byte
		err    error
	}
	done := make(chan outcome, 1)
	p.bg.Add(1)
	go func() {
		defer p.bg.Done()
		start := time.Now()
		result, reuse, err := e.invoke(p.cfg.Function.Name, payload)
		p.release(e, reuse, err, time.Since(start))
		done <- outcome{result, err}
	}()
	select {
	case o := <-done:
		return o.result, o.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// acquire returns an environment reserved for one invocation.
func (p *Pool) acquire(ctx context.Context) (*environment, error) {
	var timeout <-chan time.Time
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return nil, ErrClosed
		}
		if err := ctx.Err(); err != nil {
			p.mu.Unlock()
			return nil, err
		}
		for len(p.idle) > 0 {
			e := p.idle[len(p.idle)-1]
			p.idle = p.idle[:len(p.idle)-1]
			if e.exited() {
				// Its emulator died while idle (killed from outside).
				p.discardLocked(e, true)
				continue
			}
			p.busyLocked()
			p.mu.Unlock()
			return e, nil
		}
		if p.live < p.cfg.MaxConcurrency {
			p.live++
			p.n++
			n := p.n
			p.busyLocked()
			p.mu.Unlock()
			return p.start(ctx, n)
		}
		if p.cfg.QueueTimeout <= 0 {
			p.stats.Throttled++
			p.mu.Unlock()
			return nil, fmt.Errorf("%w: %s at its limit of %d", ErrThrottled, p.cfg.Function.Name, p.cfg.MaxConcurrency)
		}
		if timeout == nil {
			t := time.NewTimer(p.cfg.QueueTimeout)
			defer t.Stop()
			timeout = t.C
		}
		freed := p.freed
		p.stats.Queued++
		p.mu.Unlock()
		timedOut := false
		select {
		case <-freed:
		case <-timeout:
			timedOut = true
		case <-ctx.Done():
		}
		p.mu.Lock()
		p.stats.Queued--
		if timedOut {
			p.stats.Throttled++
		}
		p.mu.Unlock()
		if timedOut {
			return nil, fmt.Errorf("%w: %s at its limit of %d for %v", ErrThrottled, p.cfg.Function.Name, p.cfg.MaxConcurrency, p.cfg.QueueTimeout)
		}
		// ctx's end is noticed at the top of the loop.
	}
}

// start starts environment number n, for which acquire has reserved a
// slot, and registers it as busy.
func (p *Pool) start(ctx context.Context, n int) (*environment, error) {
	e, err := startEnvironment(ctx, &p.cfg, p.environ, p.out, n)
	p.mu.Lock()
	defer p.mu.Unlock()
	if err == nil && p.closed {
		// Close ran while it started: Close did not see it.
		p.bg.Add(1)
		go func() {
			defer p.bg.Done()
			e.stop()
		}()
		err = ErrClosed
	}
	if err != nil {
		if !p.closed {
			p.live-- // Close has zeroed it otherwise
		}
		p.stats.Busy--
		p.notifyLocked()
		return nil, err
	}
	p.all[e] = true
	p.stats.Started++
	return e, nil
}

// release returns e to the pool after an invocation that took took, or
// discards it when it may not be reused.
func (p *Pool) release(e *environment, reuse bool, err error, took time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stats.Busy--
	p.stats.Invocations++
	if e.cold {
		// From the emulator's start to the first result.
		e.cold = false
		took = time.Since(e.spawned)
		p.stats.ColdStarts++
		p.stats.ColdStartTotal += took
		p.stats.ColdStartMax = max(p.stats.ColdStartMax, took)
		fmt.Fprintf(p.out, "[%s] cold start: %v (pid %d)\n", e.name, took.Round(time.Millisecond), e.cmd.Process.Pid)
	}
	switch {
	case p.closed:
	case reuse && !e.exited():
		p.idle = append(p.idle, e)
	default:
		fmt.Fprintf(p.out, "[%s] replacing the environment: %v\n", e.name, err)
		p.discardLocked(e, false)
	}
	p.notifyLocked()
}

// discardLocked stops e in the background and frees its slot; p.mu must be
// held.
func (p *Pool) discardLocked(e *environment, quiet bool) {
	if !p.all[e] {
		return
	}
	delete(p.all, e)
	p.live--
	p.stats.Replaced++
	if quiet {
		fmt.Fprintf(p.out, "[%s] emulator exited while idle: %v\n", e.name, e.waitErr)
	}
	p.bg.Add(1)
	go func() {
		defer p.bg.Done()
		e.stop()
	}()
}

// busyLocked counts one more running invocation; p.mu must be held.
func (p *Pool) busyLocked() {
	p.stats.Busy++
	p.stats.PeakBusy = max(p.stats.PeakBusy, p.stats.Busy)
}

// notifyLocked wakes the invocations waiting for an environment; p.mu must
// be held.
func (p *Pool) notifyLocked() {
	close(p.freed)
	p.freed = make(chan struct{})
}

// Stats returns what the pool has done so far.
func (p *Pool) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.stats
	s.Live = p.live
	return s
}

// PIDs returns the process ids of the pool's running emulators, for tests
// that check that nothing is left behind.
func (p *Pool) PIDs() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	var pids []int
	for e := range p.all {
		pids = append(pids, e.cmd.Process.Pid)
	}
	sort.Ints(pids)
	return pids
}

// Close stops every environment, including those running an invocation
// (which then fails), and waits until their processes have exited. Later
// invocations fail with ErrClosed. Close is safe to call more than once.
func (p *Pool) Close() error {
	p.mu.Lock()
	p.closed = true
	envs := make([]*environment, 0, len(p.all))
	for e := range p.all {
		envs = append(envs, e)
	}
	p.all = map[*environment]bool{}
	p.idle = nil
	p.live = 0
	p.notifyLocked()
	p.mu.Unlock()

	var wg sync.WaitGroup
	for _, e := range envs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.stop()
		}()
	}
	wg.Wait()
	p.bg.Wait()
	return nil
}
