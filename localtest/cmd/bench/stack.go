package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/lambda-dedupe/dedupe/infra"
	"github.com/lambda-dedupe/dedupe/localtest/dynalite"
	"github.com/lambda-dedupe/dedupe/localtest/gateway"
)

// StackRun is one concurrency level through the local stack.
type StackRun struct {
	Concurrency int     `json:"concurrency"`
	Kind        string  `json:"kind"` // fresh or replay
	PerSecond   float64 `json:"perSecond"`
	P99ms       float64 `json:"p99ms"`
	// Failed counts the payments not answered 201 (a run fails on any).
	Failed int `json:"failed"`
}

// Stack is what the local stack measured.
type Stack struct {
	Runs []StackRun `json:"runs"`
	// ColdStartMs is the api function's time to first response of a new
	// environment under the runtime emulator (average, and the worst).
	ColdStartMs, ColdStartMaxMs float64
	// BootstrapBytes is the size of the linux/arm64 bootstrap as `make
	// build` and `sam build` make it.
	BootstrapBytes int64 `json:"bootstrapBytes"`
}

// stack runs payments through the gateway and real bootstraps under the
// Lambda Runtime Interface Emulator, on the given DynamoDB endpoint.
func stack(ctx context.Context, endpoint string, client *dynamodb.Client, sc scale) (Stack, error) {
	var out Stack
	root, err := infra.ModuleRoot()
	if err != nil {
		return out, err
	}
	dir, err := os.MkdirTemp("", "bench-")
	if err != nil {
		return out, err
	}
	defer os.RemoveAll(dir)

	arm := filepath.Join(dir, "arm64", "bootstrap")
	build := exec.CommandContext(ctx, "go", "build", "-tags", "lambda.norpc", "-trimpath", "-ldflags", "-s -w", "-o", arm, "./functions/api")
	build.Dir, build.Env = root, append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=arm64")
	if b, err := build.CombinedOutput(); err != nil {
		return out, fmt.Errorf("build arm64 bootstrap: %v: %s", err, b)
	}
	if fi, err := os.Stat(arm); err == nil {
		out.BootstrapBytes = fi.Size()
	}

	rie := filepath.Join(root, "build", "bin", "aws-lambda-rie")
	if _, err := gateway.BuildRIE(ctx, root, rie); err != nil {
		return out, err
	}
	tplPath, err := infra.FindTemplate()
	if err != nil {
		return out, err
	}
	suffix := strconv.FormatInt(time.Now().UnixNano(), 36)
	tpl, err := infra.LoadWithOptions(tplPath, &infra.Options{Names: map[string]string{
		"IdempotencyTable": "bench-idem-" + suffix, "PaymentsTable": "bench-pay-" + suffix}})
	if err != nil {
		return out, err
	}
	fns, err := infra.Functions(tpl)
	if err != nil {
		return out, err
	}
	tables, err := infra.Tables(tpl)
	if err != nil {
		return out, err
	}
	if _, err := infra.EnsureTables(ctx, client, tables); err != nil {
		return out, err
	}
	var api []infra.Function
	for _, f := range fns {
		if f.LogicalID == "ApiFunction" {
			api = append(api, f)
			if err := gateway.BuildBootstrap(ctx, root, "./functions/api", filepath.Join(dir, "api", "bootstrap")); err != nil {
				return out, err
			}
		}
	}
	st, err := gateway.NewStack(gateway.StackConfig{
		Functions: api, BootstrapDir: dir, RIE: rie,
		Env:            map[string]string{dynalite.EnvEndpoint: endpoint},
		MaxConcurrency: 8, QueueTimeout: 30 * time.Second, Output: io.Discard,
	})
	if err != nil {
		return out, err
	}
	defer st.Close()
	srv := httptest.NewServer(st.Gateway)
	defer srv.Close()

	for _, c := range sc.StackLevels {
		for _, kind := range []string{"fresh", "replay"} {
			r := through(srv.URL, c, kind, sc.PerClient*c)
			if r.Failed > 0 {
				return out, fmt.Errorf("%d of %d %s payments at concurrency %d were not answered 201", r.Failed, sc.PerClient*c, kind, c)
			}
			out.Runs = append(out.Runs, r)
		}
	}
	s := st.Pool("ApiFunction").Stats()
	if s.ColdStarts > 0 {
		out.ColdStartMs = ms(s.ColdStartTotal / time.Duration(s.ColdStarts))
		out.ColdStartMaxMs = ms(s.ColdStartMax)
	}
	return out, nil
}

// through sends n payments with c clients at once: fresh ones each under a
// new key, replays all under one key charged first.
func through(base string, c int, kind string, n int) StackRun {
	body := []byte(`{"amount":1250,"currency":"EUR","source":"tok_visa"}`)
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	var failed atomic.Int32
	send := func(key string) time.Duration {
		req, _ := http.NewRequest("POST", base+"/payments", bytes.NewReader(body))
		req.Header.Set("Idempotency-Key", key)
		req.Header.Set("Content-Type", "application/json")
		// The routes are behind AWS_IAM; the local gateway checks the form.
		req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=bench/20260101/us-east-1/execute-api/aws4_request, SignedHeaders=host;x-amz-date, Signature=00")
		t := time.Now()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			failed.Add(1)
			return time.Since(t)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			failed.Add(1)
		}
		return time.Since(t)
	}
	if kind == "replay" {
		send("replay-" + run)
	}
	lat := make([]time.Duration, n)
	var wg sync.WaitGroup
	next := make(chan int)
	start := time.Now()
	for range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				key := "replay-" + run
				if kind == "fresh" {
					key = "fresh-" + run + "-" + strconv.Itoa(i)
				}
				lat[i] = send(key)
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	total := time.Since(start)
	slices.Sort(lat)
	return StackRun{Concurrency: c, Kind: kind, PerSecond: float64(n) / total.Seconds(), P99ms: ms(lat[min(n-1, n*99/100)]), Failed: int(failed.Load())}
}
