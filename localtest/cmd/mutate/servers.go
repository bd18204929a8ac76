package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/lambda-dedupe/dedupe/localtest/internal/proc"
)

// serverWait bounds how long the run waits for the DynamoDB
// endpoint, which a loaded machine may answer slowly.
const serverWait = 30 * time.Second

// stillAnswering returns an error when the DynamoDB endpoint the tests
// use (AWS_ENDPOINT_URL_DYNAMODB, when set) does not answer within wait,
// once the mutants have been tested. A server that died during the run failed
// every test after its death: those mutants were counted killed by its
// absence, not by the tests, so the report cannot be trusted.
func stillAnswering(ctx context.Context, wait time.Duration) error {
	endpoint := os.Getenv("AWS_ENDPOINT_URL_DYNAMODB")
	if endpoint == "" {
		return nil
	}
	if err := proc.WaitDynamoDB(ctx, endpoint, wait, nil); err != nil {
		return fmt.Errorf("the DynamoDB server at %s no longer answers (%w): the mutants tested after it stopped were counted killed by its absence, not by the tests, so this report is not to be trusted; run again", endpoint, err)
	}
	return nil
}
