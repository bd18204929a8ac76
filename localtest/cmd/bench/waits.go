package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/dynamostore"
)

// WaitRun is one waiting scenario: 100 concurrent requests on one key
// whose handler takes Handler, with Config.Wait of WaitFor.
type WaitRun struct {
	Handler  string `json:"handler"`
	WaitFor  string `json:"wait"`
	Requests int    `json:"requests"`
	// Answered counts the duplicates answered with the first request's
	// result (the 201 replay), after waiting or not.
	Answered  int `json:"answered"`
	Conflicts int `json:"conflicts"`
	// ReadsMean and ReadsMax are the store reads per duplicate beyond
	// its claim.
	ReadsMean float64 `json:"readsMean"`
	ReadsMax  int     `json:"readsMax"`
	// ReadBudget is the documented bound: 6 + 2 per second of waiting.
	ReadBudget int `json:"readBudget"`
	// LateP99ms is the p99 of how long after the first request finished
	// a duplicate was answered: the last pause (at most 500 ms) plus the
	// store's queue, which on dynalite, one Node.js thread serving 100
	// callers at once, is most of it.
	LateP99ms float64 `json:"lateP99ms"`
}

// waits runs sc.Concurrent duplicates on one key for each handler
// duration of sc.WaitHandlers, one scenario after the other (about 8 s in
// all at full scale), through the HTTP API adapter with Config.Wait of
// 10 s.
func waits(ctx context.Context, c *dynamodb.Client, table string, sc scale) ([]WaitRun, error) {
	store, err := dynamostore.New(c, dynamostore.Options{Table: table})
	if err != nil {
		return nil, err
	}
	var out []WaitRun
	for _, d := range sc.WaitHandlers {
		r, err := waitRun(ctx, store, d, 10*time.Second, sc.Concurrent)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// waitRun is one scenario of waits.
func waitRun(ctx context.Context, store dedupe.Store, d, wait time.Duration, n int) (WaitRun, error) {
	key := "waits-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	res := WaitRun{Handler: d.String(), WaitFor: wait.String(), Requests: n, ReadBudget: 6 + int(2*d/time.Second)}
	var (
		mu       sync.Mutex
		runs     atomic.Int32
		finished atomic.Int64 // unix nanoseconds when the handler returned
		reads    []int
		late     []time.Duration
		wg       sync.WaitGroup
	)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var ev dedupe.Event
			g := dedupe.New(store, &dedupe.Config{Prefix: "bench", Wait: wait, OnOutcome: func(_ context.Context, e dedupe.Event) { ev = e }})
			ran := false
			h := dedupe.HTTPAPI(g, nil, func(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
				ran = true
				runs.Add(1)
				time.Sleep(d)
				defer finished.Store(time.Now().UnixNano())
				return bare(ctx, req)
			})
			// An API Gateway integration gives up after 29 s.
			dctx, cancel := context.WithTimeout(ctx, 29*time.Second)
			defer cancel()
			resp, _ := h(dctx, request(key))
			answered := time.Now()
			if ran {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			switch {
			case resp.StatusCode == 201 && resp.Headers[dedupe.HeaderReplayed] == "true":
				res.Answered++
				late = append(late, answered.Sub(time.Unix(0, finished.Load())))
			case resp.StatusCode == 409:
				res.Conflicts++
			}
			reads = append(reads, ev.StoreCalls-1)
		}()
	}
	wg.Wait()
	if runs.Load() != 1 {
		return res, fmt.Errorf("waits: the %v handler ran %d times, want 1", d, runs.Load())
	}
	sum := 0
	for _, r := range reads {
		sum += r
		res.ReadsMax = max(res.ReadsMax, r)
	}
	if len(reads) > 0 {
		res.ReadsMean = float64(sum) / float64(len(reads))
	}
	if len(late) > 0 {
		slices.Sort(late)
		res.LateP99ms = ms(late[min(len(late)-1, len(late)*99/100)])
	}
	return res, nil
}

// printWaits writes the waiting scenarios as a table.
func printWaits(w io.Writer, runs []WaitRun) {
	if len(runs) == 0 {
		return
	}
	fmt.Fprintf(w, "\nDuplicates that wait (%d concurrent on one key, Config.Wait %s; goal: 95%% answered with the result):\n", runs[0].Requests, runs[0].WaitFor)
	fmt.Fprintf(w, "  %-8s %14s %9s %11s %10s %8s %14s\n", "handler", "answered", "409", "reads mean", "reads max", "budget", "late p99 ms")
	for _, r := range runs {
		dups := r.Requests - 1
		fmt.Fprintf(w, "  %-8s %5d/%d %5.0f%% %9d %11.1f %10d %8d %14.1f\n", r.Handler, r.Answered, dups, 100*float64(r.Answered)/float64(dups), r.Conflicts, r.ReadsMean, r.ReadsMax, r.ReadBudget, r.LateP99ms)
	}
}
