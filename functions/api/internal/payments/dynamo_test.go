package payments_test

import (
	"context"
	"crypto/rand"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/lambda-dedupe/dedupe/functions/api/internal/payments"
	"github.com/lambda-dedupe/dedupe/infra"
	"github.com/lambda-dedupe/dedupe/localtest/dynalite"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/dynamostore"
)

// dynamoBackend creates both tables of template.yaml, under names unique
// to the test, on the test endpoint (AWS_ENDPOINT_URL_DYNAMODB; the test
// is skipped without it, or fails in CI), exactly as deployed.
var dynamoBackend = backend{"dynamodb", func(t *testing.T) (dedupe.Store, payments.Repository) {
	client := newDynamoClient(t)
	idem, pay := createTables(t, client)
	store, err := dynamostore.New(client, dynamostore.Options{Table: idem})
	if err != nil {
		t.Fatal(err)
	}
	return store, payments.NewDynamoRepository(client, pay)
}}

func newDynamoClient(t *testing.T) *dynamodb.Client {
	t.Helper()
	return dynamodb.New(dynamodb.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(dynalite.Endpoint(t)),
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "x", SecretAccessKey: "x", Source: "test"}, nil
		}),
	})
}

// createTables creates the template's idempotency and payments tables and
// returns their names.
func createTables(t *testing.T, client *dynamodb.Client) (idem, pay string) {
	t.Helper()
	suffix := strings.ToLower(rand.Text()[:10])
	idem, pay = "idem-"+suffix, "payments-"+suffix
	path, err := infra.FindTemplate()
	if err != nil {
		t.Fatal(err)
	}
	tpl, err := infra.LoadWithOptions(path, &infra.Options{Names: map[string]string{"IdempotencyTable": idem, "PaymentsTable": pay}})
	if err != nil {
		t.Fatal(err)
	}
	tables, err := infra.Tables(tpl)
	if err != nil {
		t.Fatal(err)
	}
	var mine []infra.Table
	for _, tb := range tables {
		if tb.LogicalID == "IdempotencyTable" || tb.LogicalID == "PaymentsTable" {
			mine = append(mine, tb)
		}
	}
	if len(mine) != 2 {
		t.Fatalf("template %s: found %d of the IdempotencyTable and PaymentsTable", path, len(mine))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := infra.EnsureTables(ctx, client, mine); err != nil {
		t.Fatalf("create tables: %v", err)
	}
	t.Cleanup(func() {
		for _, name := range []string{idem, pay} {
			_, _ = client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(name)})
		}
	})
	return idem, pay
}

// TestAPIDynamoDB runs the whole suite through DynamoDB: dynamostore for
// the idempotency records, DynamoRepository for the payments.
func TestAPIDynamoDB(t *testing.T) { runSuite(t, dynamoBackend) }

func TestDynamoRepository(t *testing.T) {
	ctx := context.Background()
	client := newDynamoClient(t)
	_, table := createTables(t, client)
	repo := payments.NewDynamoRepository(client, table)
	created := time.Date(2031, 5, 6, 7, 8, 9, 123_000_000, time.UTC)
	p := payments.Payment{ID: "pay_A", Amount: 1250, Currency: "EUR", Source: "tok_visa", Status: payments.StatusSucceeded, Created: created}

	if err := repo.Put(ctx, p); err != nil {
		t.Fatal(err)
	}
	if err := repo.Put(ctx, p); err == nil {
		t.Error("second Put of the same ID: got nil error, want a refusal")
	}
	if got, err := repo.Get(ctx, "pay_A"); err != nil || got != p {
		t.Errorf("Get = %+v, %v; want %+v", got, err, p)
	}
	for _, id := range []string{"pay_missing", ""} {
		if _, err := repo.Get(ctx, id); !errors.Is(err, payments.ErrNotFound) {
			t.Errorf("Get(%q): err = %v, want ErrNotFound", id, err)
		}
	}
	for _, cursor := range []string{"!!", "=="} {
		if _, _, err := repo.List(ctx, 10, cursor); !errors.Is(err, payments.ErrInvalidCursor) {
			t.Errorf("List(cursor %q): err = %v, want ErrInvalidCursor", cursor, err)
		}
	}
	for _, id := range []string{"pay_B", "pay_C"} {
		q := p
		q.ID = id
		if err := repo.Put(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]bool{}
	cursor := ""
	for range 10 {
		page, next, err := repo.List(ctx, 2, cursor)
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range page {
			seen[q.ID] = true
		}
		if next == "" {
			break
		}
		cursor = next
	}
	if len(seen) != 3 {
		t.Errorf("listed %v, want pay_A, pay_B and pay_C", seen)
	}
}
