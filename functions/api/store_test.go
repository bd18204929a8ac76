package main

import (
	"context"
	"crypto/rand"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/lambda-dedupe/dedupe/localtest/pgtest"
	"github.com/lambda-dedupe/dedupe/localtest/redistest"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
)

// TestNewStore builds each store DEDUPE_STORE names against the test
// servers and runs a guarded call twice through it: once, then replayed.
func TestNewStore(t *testing.T) {
	tests := []struct {
		name string
		s    func(t *testing.T) settings
	}{
		{"redis", func(t *testing.T) settings { return settings{Store: storeRedis, RedisURL: redistest.URL(t)} }},
		{"postgres", func(t *testing.T) settings { return settings{Store: storePostgres, DatabaseURL: pgtest.URL(t)} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			store, err := newStore(ctx, tt.s(t), dynamodb.New(dynamodb.Options{Region: "us-east-1"}), nil)
			if err != nil {
				t.Fatal(err)
			}
			g := dedupe.New(store, &dedupe.Config{Prefix: "api-test", Now: func() time.Time { return time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC) }})
			runs := 0
			fn := func(context.Context) (dedupe.Result, error) {
				runs++
				return dedupe.Result{StatusCode: 201, Body: []byte("ok")}, nil
			}
			key := rand.Text()
			for range 2 {
				if _, err := g.Do(ctx, dedupe.Call{Key: key, Fingerprint: "fp"}, fn); err != nil {
					t.Fatal(err)
				}
			}
			if runs != 1 {
				t.Errorf("runs = %d, want 1", runs)
			}
		})
	}
	t.Run("bucket without an S3 client", func(t *testing.T) {
		s := settings{Store: storeDynamoDB, IdempotencyTable: "t", LargeResponseBucket: "b"}
		if _, err := newStore(context.Background(), s, dynamodb.New(dynamodb.Options{Region: "us-east-1"}), nil); err == nil {
			t.Error("newStore: got nil, want the half-configured LargeResults refused")
		}
	})
	t.Run("bad URLs", func(t *testing.T) {
		for _, s := range []settings{{Store: storeRedis, RedisURL: "http://nope"}, {Store: storePostgres, DatabaseURL: "::not a url"}} {
			if _, err := newStore(context.Background(), s, nil, nil); err == nil {
				t.Errorf("newStore(%+v): got nil, want an error", s)
			}
		}
	})
}
