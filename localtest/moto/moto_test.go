package moto

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambda-dedupe/dedupe/localtest/internal/proc"
)

// requireInstalled skips the test when moto_server is not on PATH, or
// fails it when CI is set.
func requireInstalled(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath(DefaultBin); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("moto_server required in CI: %v", err)
		}
		t.Skipf("moto_server not installed (%v): %s", err, InstallHint)
	}
}

func TestStartStop(t *testing.T) {
	requireInstalled(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := Start(ctx, Options{})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	if err := proc.PingDynamoDB(ctx, http.DefaultClient, s.Endpoint()); err != nil {
		t.Errorf("ListTables on a started server: %v", err)
	}
	if err := s.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	// The port is free once Stop returns.
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port())))
	if err != nil {
		t.Errorf("port %d still taken after Stop: %v", s.Port(), err)
	} else {
		l.Close()
	}
	if err := s.Stop(); err != nil {
		t.Errorf("second Stop: got %v, want nil", err)
	}
}

func TestStartNotInstalled(t *testing.T) {
	_, err := Start(context.Background(), Options{Bin: "moto-no-such-server"})
	if !errors.Is(err, ErrNotInstalled) {
		t.Errorf("got %v, want %v", err, ErrNotInstalled)
	}
}

func TestStartExitsWhileStarting(t *testing.T) {
	// false exits at once: Start must report it, not wait for the timeout.
	_, err := Start(context.Background(), Options{Bin: "false", StartTimeout: time.Hour})
	if !errors.Is(err, ErrNotReady) {
		t.Errorf("got %v, want %v", err, ErrNotReady)
	}
}

// TestSerializedConditionalWrites sends rounds of concurrent conditional
// PutItems on one absent key: through the serializing proxy exactly one
// of each round succeeds, as on DynamoDB. (Straight to moto_server, with
// Options.Concurrent, two sometimes do under load; that is why the proxy
// exists, and why this test cannot assert the opposite.)
func TestSerializedConditionalWrites(t *testing.T) {
	requireInstalled(t)
	ctx := t.Context()
	s, err := Start(ctx, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	c := dynamodb.New(dynamodb.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(s.Endpoint()),
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "x", SecretAccessKey: "x"}, nil
		}),
	})
	if _, err := c.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName: aws.String("t"), BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
	}); err != nil {
		t.Fatal(err)
	}
	const rounds, writers = 10, 50
	for round := range rounds {
		var wins atomic.Int32
		var wg sync.WaitGroup
		start := make(chan struct{})
		for range writers {
			wg.Go(func() {
				<-start
				_, err := c.PutItem(ctx, &dynamodb.PutItemInput{
					TableName:           aws.String("t"),
					Item:                map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "k" + strconv.Itoa(round)}},
					ConditionExpression: aws.String("attribute_not_exists(pk)"),
				})
				var ccf *types.ConditionalCheckFailedException
				switch {
				case err == nil:
					wins.Add(1)
				case !errors.As(err, &ccf):
					t.Errorf("PutItem: %v", err)
				}
			})
		}
		close(start)
		wg.Wait()
		if got := wins.Load(); got != 1 {
			t.Errorf("round %d: %d of %d conditional writes succeeded, want 1", round, got, writers)
		}
	}
}
