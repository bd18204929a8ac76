package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/dynamostore"
)

// childEnv, set in a process's environment, makes it a racer.
const childEnv = "DEDUPE_RACE_CHILD"

// Round is one size: how many racers did the work with each check.
type Round struct {
	N            int
	Naive, Guard int
}

// What a racer prints, one line: whether it did the work.
const (
	executed = "executed"
	skipped  = "skipped"
)

// run races each size of ns, naive then guarded, with racers started
// from self, against the endpoint, prints the table to w and returns it.
func run(ctx context.Context, w io.Writer, self, endpoint string, ns []int, work time.Duration) ([]Round, error) {
	client := newClient(endpoint)
	suffix := strconv.FormatInt(time.Now().UnixNano(), 36)
	guardTable, naiveTable := "race-guard-"+suffix, "race-naive-"+suffix
	if err := dynamostore.CreateTable(ctx, client, guardTable); err != nil {
		return nil, err
	}
	defer client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(guardTable)})
	if _, err := client.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(naiveTable),
		BillingMode:          types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
	}); err != nil {
		return nil, fmt.Errorf("create table %s: %w", naiveTable, err)
	}
	defer client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(naiveTable)})
	if err := dynamodb.NewTableExistsWaiter(client).Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(naiveTable)}, time.Minute); err != nil {
		return nil, err
	}

	fmt.Fprintf(w, "Each round starts that many processes, which handle the same request at the same moment (the work takes %v):\n\n", work)
	var rounds []Round
	for _, n := range ns {
		r := Round{N: n}
		var err error
		key := "order-" + strconv.Itoa(n) + "-" + suffix
		if r.Naive, err = race(ctx, self, n, "-mode", "naive", "-table", naiveTable, "-key", key, "-work", work.String(), "-endpoint", endpoint); err != nil {
			return nil, err
		}
		if r.Guard, err = race(ctx, self, n, "-mode", "guard", "-table", guardTable, "-key", key, "-work", work.String(), "-endpoint", endpoint); err != nil {
			return nil, err
		}
		rounds = append(rounds, r)
	}
	printRounds(w, rounds)
	return rounds, nil
}

// printRounds writes the table.
func printRounds(w io.Writer, rounds []Round) {
	fmt.Fprintf(w, "%-22s %-34s %s\n", "concurrent duplicates", "naive check (read, work, write)", "dedupe guard")
	for _, r := range rounds {
		fmt.Fprintf(w, "%-22d %-34s %s\n", r.N, fmt.Sprintf("%d executed", r.Naive), fmt.Sprintf("%d executed", r.Guard))
	}
}

// race starts n racers with args, lets them go at once when all are
// ready, and counts those that did the work.
func race(ctx context.Context, self string, n int, args ...string) (int, error) {
	type racer struct {
		cmd   *exec.Cmd
		go_   io.WriteCloser
		lines *bufio.Scanner
	}
	racers := make([]racer, 0, n)
	defer func() {
		for _, r := range racers {
			r.go_.Close()
			r.cmd.Wait()
		}
	}()
	for range n {
		cmd := exec.CommandContext(ctx, self, args...)
		cmd.Env = append(os.Environ(), childEnv+"=1")
		cmd.Stderr = os.Stderr
		in, err := cmd.StdinPipe()
		if err != nil {
			return 0, err
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			return 0, err
		}
		if err := cmd.Start(); err != nil {
			return 0, fmt.Errorf("start a racer: %w", err)
		}
		racers = append(racers, racer{cmd, in, bufio.NewScanner(out)})
	}
	// Each racer has its client and store (the guard's DescribeTable
	// included) before it says ready; then all are let go at once.
	for _, r := range racers {
		if !r.lines.Scan() || r.lines.Text() != "ready" {
			return 0, fmt.Errorf("a racer did not get ready (%q)", r.lines.Text())
		}
	}
	for _, r := range racers {
		r.go_.Close()
	}
	count := 0
	for _, r := range racers {
		if !r.lines.Scan() {
			return 0, errors.New("a racer said nothing")
		}
		switch r.lines.Text() {
		case executed:
			count++
		case skipped:
		default:
			return 0, fmt.Errorf("a racer said %q", r.lines.Text())
		}
	}
	for i := range racers {
		if err := racers[i].cmd.Wait(); err != nil {
			return 0, fmt.Errorf("a racer: %w", err)
		}
	}
	racers = nil
	return count, nil
}

// child is one racer: it gets ready, waits for stdin to close, then
// handles the request with its check and prints whether it did the work.
func child(ctx context.Context, args []string, stdin io.Reader, stdout io.Writer) int {
	fs := flag.NewFlagSet("racer", flag.ContinueOnError)
	mode := fs.String("mode", "", "naive or guard")
	table := fs.String("table", "", "table")
	key := fs.String("key", "", "the request's idempotency key")
	work := fs.Duration("work", 0, "how long the work takes")
	endpoint := fs.String("endpoint", "", "DynamoDB endpoint")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	client := newClient(*endpoint)
	doWork := func() { time.Sleep(*work) } // the charge, the e-mail, the shipment
	var handle func() (bool, error)
	switch *mode {
	case "naive":
		handle = func() (bool, error) { return naive(ctx, client, *table, *key, doWork) }
	case "guard":
		store, err := dynamostore.New(client, dynamostore.Options{Table: *table})
		if err != nil {
			fmt.Fprintln(os.Stderr, "racer:", err)
			return 1
		}
		g := dedupe.New(store, &dedupe.Config{Prefix: "race", Logger: discard})
		handle = func() (bool, error) {
			ran := false
			_, err := g.Do(ctx, dedupe.Call{Key: *key, Fingerprint: "charge 1250 EUR"}, func(context.Context) (dedupe.Result, error) {
				ran = true
				doWork()
				return dedupe.Result{StatusCode: 201}, nil
			})
			var ce *dedupe.ConflictError
			if errors.As(err, &ce) {
				err = nil // in flight: the duplicate gets 409 and does nothing
			}
			return ran, err
		}
	default:
		fmt.Fprintf(os.Stderr, "racer: -mode %q\n", *mode)
		return 2
	}
	fmt.Fprintln(stdout, "ready")
	io.Copy(io.Discard, stdin) // until the parent lets all go
	ran, err := handle()
	if err != nil {
		fmt.Fprintln(os.Stderr, "racer:", err)
		return 1
	}
	if ran {
		fmt.Fprintln(stdout, executed)
	} else {
		fmt.Fprintln(stdout, skipped)
	}
	return 0
}

// naive is the check many handlers write: read the key; if it is not
// there, do the work and record the key. Between the read and the write,
// every duplicate that read too does the work as well.
func naive(ctx context.Context, c *dynamodb.Client, table, key string, work func()) (bool, error) {
	k := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: key}}
	out, err := c.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: k, ConsistentRead: aws.Bool(true)})
	if err != nil {
		return false, err
	}
	if len(out.Item) > 0 {
		return false, nil // seen: a duplicate
	}
	work()
	_, err = c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: k})
	return true, err
}

// newClient is a DynamoDB client for endpoint with dummy credentials.
func newClient(endpoint string) *dynamodb.Client {
	return dynamodb.New(dynamodb.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(endpoint),
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "x", SecretAccessKey: "x", Source: "race"}, nil
		}),
	})
}

// discard drops the guard's log lines: the racers' answer is the table.
var discard = slog.New(slog.DiscardHandler)
