package dedupe_test

import (
	"context"
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
