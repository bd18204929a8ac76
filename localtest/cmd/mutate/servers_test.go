package main

import (
	"context"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/lambda-dedupe/dedupe/localtest/dynalite"
)

// TestStillAnswering: a run whose DynamoDB server stopped answering is
// refused, naming why its kills cannot be trusted; a live server, or none
// configured, passes.
func TestStillAnswering(t *testing.T) {
	live := dynalite.Endpoint(t)
	ctx := context.Background()
	if err := stillAnswering(ctx, serverWait); err != nil {
		t.Errorf("with the live server %s: %v", live, err)
	}
	// A port that was free a moment ago: nothing listens there.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + l.Addr().String()
	l.Close()
	t.Setenv("AWS_ENDPOINT_URL_DYNAMODB", dead)
	err = stillAnswering(ctx, 200*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), dead) || !strings.Contains(err.Error(), "not to be trusted") {
		t.Errorf("with nothing at %s: %v; want a refusal naming the endpoint", dead, err)
	}
	os.Unsetenv("AWS_ENDPOINT_URL_DYNAMODB")
	if err := stillAnswering(ctx, serverWait); err != nil {
		t.Errorf("with no endpoint set: %v", err)
	}
}
