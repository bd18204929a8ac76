package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/lambda-dedupe/dedupe/infra"
)

// StackConfig configures a [Stack]: the functions of a template, each run
// by a Pool, and the HTTP API routes of the template served by a Gateway.
type StackConfig struct {
	// Functions are the template's functions, as infra.Functions returns
	// them: timeout, memory, environment, HttpApi routes and schedules.
	Functions []infra.Function

	// BootstrapDir holds the functions' bootstraps, built for this machine:
	// BootstrapDir/<BootstrapName(logical id)>/bootstrap, for example
	// build/local/api/bootstrap for ApiFunction.
	BootstrapDir string

	// RIE is the path of the aws-lambda-rie executable.
	RIE string

	// Env is added to every function's environment, over the template's:
	// typically AWS_ENDPOINT_URL_DYNAMODB.
	Env map[string]string

	// MaxConcurrency, QueueTimeout, Output and Verbose configure each
	// function's pool as in PoolConfig.
	MaxConcurrency int
	QueueTimeout   time.Duration
	Output         io.Writer
	Verbose        bool

	// Logger and Now configure the gateway as in Config.
	Logger *log.Logger
	Now    func() time.Time
}

// StackRoute is one route a Stack serves.
type StackRoute struct {
	// Key is the route key, e.g. "GET /payments/{id}".
	Key string
	// Function is the logical id of the function behind it.
	Function string
}

// StackSchedule is one schedule of a Stack's function.
type StackSchedule struct {
	// Function is the function's logical id; Event the event's name.
	Function, Event string
	// Schedule is the event as the template declares it.
	Schedule infra.Schedule
}

// Stack is a template's functions and HTTP API, running locally. Create it
// with NewStack; serve Gateway with an http.Server; run schedules with
// InvokeSchedule; Close it to stop every execution environment.
type Stack struct {
	// Gateway serves the template's HttpApi routes.
	Gateway *Gateway

	pools     map[string]*Pool
	routes    []StackRoute
	schedules []StackSchedule
	now       func() time.Time
}

// BootstrapName returns the directory name of a function's bootstrap under
// StackConfig.BootstrapDir and of its source under functions/: the logical
// id lower-cased without a "Function" suffix ("ApiFunction" is "api").
func BootstrapName(logicalID string) string {
	return strings.ToLower(strings.TrimSuffix(logicalID, "Function"))
}

// NewStack creates a pool for every function and a gateway for every
// HttpApi route with payload format 2.0. Nothing starts running until the
// first invocation. It fails if a bootstrap is missing, a route uses
// payload format 1.0 (not emulated) or two functions declare the same
// route.
func NewStack(cfg StackConfig) (*Stack, error) {
	s := &Stack{pools: map[string]*Pool{}, now: cfg.Now}
	if s.now == nil {
		s.now = time.Now
	}
	var routes []Route
	for _, f := range cfg.Functions {
		env := make(map[string]string, len(f.Env)+len(cfg.Env))
		for k, v := range f.Env {
			env[k] = v
		}
		for k, v := range cfg.Env {
			env[k] = v
		}
		pool, err := NewPool(PoolConfig{
			RIE: cfg.RIE,
			Function: Function{
				Name:      f.LogicalID,
				Bootstrap: filepath.Join(cfg.BootstrapDir, BootstrapName(f.LogicalID), "bootstrap"),
				Timeout:   f.Timeout,
				MemoryMB:  f.MemorySize,
				Env:       env,
			},
			MaxConcurrency: cfg.MaxConcurrency,
			QueueTimeout:   cfg.QueueTimeout,
			Output:         cfg.Output,
			Verbose:        cfg.Verbose,
		})
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("function %s: %w", f.LogicalID, err)
		}
		s.pools[f.LogicalID] = pool
		for _, r := range f.Routes {
			if r.PayloadFormatVersion != "" && r.PayloadFormatVersion != "2.0" {
				s.Close()
				return nil, fmt.Errorf("%w: %s %s uses payload format %s; only 2.0 is emulated", ErrRoute, f.LogicalID, r.RouteKey(), r.PayloadFormatVersion)
			}
			routes = append(routes, Route{Key: r.RouteKey(), Function: pool, Timeout: r.Timeout,
				Auth: Auth{Type: r.Auth.Type, Issuer: r.Auth.Issuer, Audience: r.Auth.Audience}})
			s.routes = append(s.routes, StackRoute{Key: r.RouteKey(), Function: f.LogicalID})
		}
		for _, sc := range f.Schedules {
			s.schedules = append(s.schedules, StackSchedule{Function: f.LogicalID, Event: sc.Event, Schedule: sc})
		}
	}
	sort.Slice(s.routes, func(i, j int) bool { return s.routes[i].Key < s.routes[j].Key })
	g, err := New(Config{Routes: routes, Logger: cfg.Logger, Now: cfg.Now})
	if err != nil {
		s.Close()
		return nil, err
	}
	s.Gateway = g
	return s, nil
}

// Pool returns the pool of the function with the given logical id, or nil.
func (s *Stack) Pool(logicalID string) *Pool {
	return s.pools[logicalID]
}

// Routes returns the routes the gateway serves, sorted by key.
func (s *Stack) Routes() []StackRoute {
	return append([]StackRoute(nil), s.routes...)
}

// Schedules returns the functions' schedules, enabled or not.
func (s *Stack) Schedules() []StackSchedule {
	return append([]StackSchedule(nil), s.schedules...)
}

// InvokeSchedule invokes sc's function now with the event its schedule
// sends: the schedule's Input when set, otherwise an EventBridge
// "Scheduled Event". It returns the function's result.
func (s *Stack) InvokeSchedule(ctx context.Context, sc StackSchedule) ([]byte, error) {
	pool := s.pools[sc.Function]
	if pool == nil {
		return nil, fmt.Errorf("%w: no function %s", ErrStart, sc.Function)
	}
	payload := []byte(sc.Schedule.Input)
	if len(payload) == 0 {
		var err error
		payload, err = json.Marshal(map[string]any{
			"version":     "0",
			"id":          newUUID(),
			"detail-type": "Scheduled Event",
			"source":      "aws.events",
			"account":     DefaultAccountID,
			"time":        s.now().UTC().Format(time.RFC3339),
			"region":      DefaultRegion,
			"resources":   []string{fmt.Sprintf("arn:aws:events:%s:%s:rule/%s-%s", DefaultRegion, DefaultAccountID, sc.Function, sc.Event)},
			"detail":      map[string]any{},
		})
		if err != nil {
			return nil, err
		}
	}
	return pool.Invoke(ctx, payload)
}

// PIDs returns the process ids of every running emulator of the stack.
func (s *Stack) PIDs() []int {
	var pids []int
	for _, p := range s.pools {
		pids = append(pids, p.PIDs()...)
	}
	sort.Ints(pids)
	return pids
}

// Close closes every pool: it stops every execution environment and waits
// for their processes to exit.
func (s *Stack) Close() error {
	for _, p := range s.pools {
		p.Close()
	}
	return nil
}
