package dedupe_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/memstore"
)

// A guard around any Lambda work: the first delivery of a message runs,
// a redelivery gets the stored result back.
func ExampleGuard_Do() {
	g := dedupe.New(memstore.New(), &dedupe.Config{Prefix: "orders-consumer"})
	ship := func(ctx context.Context) (dedupe.Result, error) {
		fmt.Println("shipping order 42")
		return dedupe.Result{Body: []byte(`{"shipment":"s-1"}`)}, nil
	}

	for range 2 { // the queue delivers the message twice
		out, err := g.Do(context.Background(), dedupe.Call{Key: "msg-7f3a", Fingerprint: "sha256-of-body"}, ship)
		if err != nil {
			fmt.Println("error:", err)
			continue
		}
		fmt.Printf("replayed=%v result=%s\n", out.Replayed, out.Result.Body)
	}
	// Output:
	// shipping order 42
	// replayed=false result={"shipment":"s-1"}
	// replayed=true result={"shipment":"s-1"}
}

// Errors that describe an expected outcome are checked with errors.Is.
func ExampleConflictError() {
	g := dedupe.New(memstore.New(), nil)
	ctx := context.Background()
	g.Do(ctx, dedupe.Call{Key: "key-1", Fingerprint: "fingerprint-A"}, func(context.Context) (dedupe.Result, error) {
		return dedupe.Result{Body: []byte("ok")}, nil
	})

	_, err := g.Do(ctx, dedupe.Call{Key: "key-1", Fingerprint: "fingerprint-B"}, func(context.Context) (dedupe.Result, error) {
		panic("never runs")
	})
	var conflict *dedupe.ConflictError
	fmt.Println(errors.Is(err, dedupe.ErrFingerprintMismatch), errors.As(err, &conflict))
	// Output: true true
}

// A hand-written HTTP adapter over Guard.Do answers the guard's errors
// as the built-in adapters do: ErrorResult gives the status, the problem
// document and Retry-After.
func ExampleErrorResult() {
	g := dedupe.New(memstore.New(), &dedupe.Config{Prefix: "orders"})
	serve := func(ctx context.Context, key string, body []byte, fn dedupe.Func) dedupe.Result {
		out, err := g.Do(ctx, dedupe.Call{Key: key, Fingerprint: dedupe.Fingerprint(body, "POST /orders")}, fn)
		if err != nil && !errors.Is(err, dedupe.ErrNotStored) && !errors.Is(err, dedupe.ErrResultTooLarge) && !errors.Is(err, dedupe.ErrRanUnguarded) {
			return dedupe.ErrorResult(err, g.Now()) // fn's own error too: a 500
		}
		return out.Result // the first answer, a replay, or one to log a warning for
	}
	ctx := context.Background()
	var dup dedupe.Result
	serve(ctx, "order-1", []byte(`{"sku":"a"}`), func(ctx context.Context) (dedupe.Result, error) {
		// A retry arrives while the first request runs.
		dup = serve(ctx, "order-1", []byte(`{"sku":"a"}`), nil)
		return dedupe.Result{StatusCode: 201, Body: []byte(`{"order":1}`)}, nil
	})
	fmt.Println(dup.StatusCode, dup.Headers["Content-Type"], dup.Headers["Retry-After"] != nil)
	reused := serve(ctx, "order-1", []byte(`{"sku":"b"}`), nil)
	var p dedupe.Problem
	json.Unmarshal(reused.Body, &p)
	fmt.Println(reused.StatusCode, p.Type == dedupe.ProblemKeyReused, p.Title)
	// Output:
	// 409 [application/problem+json] true
	// 422 true Idempotency-Key reused with a different request
}
