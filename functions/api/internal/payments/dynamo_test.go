package payments_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lambda-dedupe/dedupe/functions/api/internal/payments"
	"github.com/lambda-dedupe/dedupe/localtest/dynamotest"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/dynamostore"
)

// dynamoBackend creates both tables of template.yaml, under names unique
// to the test, on the test endpoint (AWS_ENDPOINT_URL_DYNAMODB; the test
// is skipped without it, or fails in CI), exactly as deployed.
var dynamoBackend = backend{"dynamodb", func(t *testing.T) (dedupe.Store, payments.Repository) {
	client := dynamotest.Client(t)
	names := dynamotest.CreateTables(t, client, "IdempotencyTable", "PaymentsTable")
	store, err := dynamostore.New(client, dynamostore.Options{Table: names["IdempotencyTable"]})
	if err != nil {
		t.Fatal(err)
	}
	return store, payments.NewDynamoRepository(client, names["PaymentsTable"])
}}

// TestAPIDynamoDB runs the whole suite through DynamoDB: dynamostore for
// the idempotency records, DynamoRepository for the payments.
func TestAPIDynamoDB(t *testing.T) { runSuite(t, dynamoBackend) }

func TestDynamoRepository(t *testing.T) {
	ctx := context.Background()
	client := dynamotest.Client(t)
	repo := payments.NewDynamoRepository(client, dynamotest.CreateTables(t, client, "PaymentsTable")["PaymentsTable"])
	created := time.Date(2031, 5, 6, 7, 8, 9, 123_000_000, time.UTC)
	p := payments.Payment{ID: "pay_A", Amount: 1250, Currency: "EUR", Source: "tok_visa", Status: payments.StatusSucceeded, Created: created, Owner: "own_alice"}

	if _, err := repo.Put(ctx, p); err != nil {
		t.Fatal(err)
	}
	// A retried write of the same payment succeeds and changes nothing;
	// a different payment under the same ID is refused.
	again := p
	again.Created = created.Add(time.Second)
	if got, err := repo.Put(ctx, again); err != nil || !got.Created.Equal(created) {
		t.Errorf("second Put of the same payment: %+v, %v; want the first row (a retried write)", got, err)
	}
	clash := p
	clash.Amount = 9999
	if _, err := repo.Put(ctx, clash); !errors.Is(err, payments.ErrConflict) {
		t.Errorf("Put of another payment under the same ID: got %v, want ErrConflict", err)
	}
	theirs := p
	theirs.Owner = "own_bob"
	if _, err := repo.Put(ctx, theirs); !errors.Is(err, payments.ErrConflict) {
		t.Errorf("Put of another owner's payment under the same ID: got %v, want ErrConflict", err)
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
		if _, _, err := repo.List(ctx, "own_alice", 10, cursor); !errors.Is(err, payments.ErrInvalidCursor) {
			t.Errorf("List(cursor %q): err = %v, want ErrInvalidCursor", cursor, err)
		}
	}
	for _, id := range []string{"pay_B", "pay_C", "pay_D"} {
		q := p
		q.ID = id
		if id == "pay_D" {
			q.Owner = "own_bob"
		}
		if _, err := repo.Put(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]bool{}
	cursor := ""
	for range 10 {
		page, next, err := repo.List(ctx, "own_alice", 2, cursor)
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
	if len(seen) != 3 || seen["pay_D"] {
		t.Errorf("listed %v, want pay_A, pay_B and pay_C (pay_D is bob's)", seen)
	}
	if page, _, err := repo.List(ctx, "", 10, ""); err != nil || len(page) != 0 {
		t.Errorf("List of the empty owner = %v, %v; want nothing", page, err)
	}
}
