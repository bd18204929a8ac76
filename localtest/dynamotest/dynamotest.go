package dynamotest

import (
	"context"
	"crypto/rand"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"

	"github.com/lambda-dedupe/dedupe/infra"
	"github.com/lambda-dedupe/dedupe/localtest/dynalite"
	"github.com/lambda-dedupe/dedupe/pkg/dynamostore"
)

// region is the region of the clients [Client] returns. Local servers
// accept any region; a fixed one keeps the tests independent of the
// environment.
const region = "us-east-1"

// createTimeout bounds the creation of the tables in [CreateTables].
const createTimeout = time.Minute

// Client returns a DynamoDB client for the test endpoint
// (AWS_ENDPOINT_URL_DYNAMODB, see [dynalite.Endpoint]: t is skipped without
// it, or fails in CI), in us-east-1, with static dummy credentials. optFns
// are applied after those settings, as by [dynamodb.New]; a test may use
// them to add middleware (such as [WithListingBudget]), or to point the
// client at another endpoint.
func Client(t testing.TB, optFns ...func(*dynamodb.Options)) *dynamodb.Client {
	t.Helper()
	return dynamodb.New(dynamodb.Options{
		Region:       region,
		BaseEndpoint: aws.String(dynalite.Endpoint(t)),
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "x", SecretAccessKey: "x", Source: "dynamotest"}, nil
		}),
	}, optFns...)
}

// WithListingBudget returns a client option that refuses every Query and
// Scan beyond n with [ErrListingBudget], without sending it, and fails t
// when the test ends if it did. Code under test whose listing never ends
// (one that starts again from its first page) then fails its test in
// seconds, where it hung until go test's timeout: on dynalite a runaway
// listing makes about a thousand Queries a second. pkg/dynamostore's
// tests use it (make mutate's looping mutants); choose n well above what
// the test needs, and give a client one budget only.
func WithListingBudget(t testing.TB, n int) func(*dynamodb.Options) {
	var listings atomic.Int64
	t.Cleanup(func() {
		if got := listings.Load(); got > int64(n) {
			t.Errorf("dynamotest: the client was asked for %d Queries and Scans, more than its listing budget (%d): a listing that never ends?", got, n)
		}
	})
	return func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
			return st.Initialize.Add(middleware.InitializeMiddlewareFunc("dynamotestListingBudget",
				func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
					switch in.Parameters.(type) {
					case *dynamodb.QueryInput, *dynamodb.ScanInput:
						if listings.Add(1) > int64(n) {
							return middleware.InitializeOutput{}, middleware.Metadata{}, ErrListingBudget
						}
					}
					return next.HandleInitialize(ctx, in)
				}), middleware.Before)
		})
	}
}

// ErrListingBudget is the error of a Query or Scan beyond the budget of
// [WithListingBudget].
var ErrListingBudget = errors.New("dynamotest: more Queries and Scans than the client's listing budget")

// UniqueName returns prefix, a hyphen and 12 random lower-case letters and
// digits: a table name that no other test of this or any other run uses,
// valid for DynamoDB when prefix is.
func UniqueName(prefix string) string {
	return prefix + "-" + strings.ToLower(rand.Text()[:12])
}

// tables returns the tables of template.yaml with the given logical ids,
// in that order, named as names says (see [infra.Options].Names). It fails
// t, and returns nil, when the template cannot be loaded or lacks an id.
func tables(t testing.TB, names map[string]string, logicalIDs []string) []infra.Table {
	t.Helper()
	path, err := infra.FindTemplate()
	if err != nil {
		// Outside this repository: the idempotency table's schema is
		// built in, every other table needs the template.
		if builtin := builtinTables(names, logicalIDs); builtin != nil {
			return builtin
		}
		t.Fatalf("dynamotest: %v (only %s is available without it)", err, IdempotencyTableID)
		return nil
	}
	tpl, err := infra.LoadWithOptions(path, &infra.Options{Names: names})
	if err != nil {
		t.Fatalf("dynamotest: %v", err)
		return nil
	}
	all, err := infra.Tables(tpl)
	if err != nil {
		t.Fatalf("dynamotest: %v", err)
		return nil
	}
	out := make([]infra.Table, 0, len(logicalIDs))
	for _, id := range logicalIDs {
		i := slices.IndexFunc(all, func(tb infra.Table) bool { return tb.LogicalID == id })
		if i < 0 {
			t.Fatalf("dynamotest: template %s declares no table %s", path, id)
			return nil
		}
		out = append(out, all[i])
	}
	return out
}

// CreateTables creates the tables of template.yaml with the given logical
// ids (at least one) on c's endpoint (in another module, without a
// template.yaml, only IdempotencyTableID, from dynamostore.TableInput),
// each under a name from [UniqueName] with its logical id as prefix, and waits until they are ACTIVE, with
// [infra.EnsureTables]. It returns the names by logical id, and deletes the
// tables when the test ends (t.Cleanup). It fails t when a table cannot be
// created within a minute or is not in the template.
func CreateTables(t testing.TB, c *dynamodb.Client, logicalIDs ...string) map[string]string {
	t.Helper()
	if len(logicalIDs) == 0 {
		t.Fatal("dynamotest: CreateTables needs at least one logical id")
		return nil
	}
	names := make(map[string]string, len(logicalIDs))
	for _, id := range logicalIDs {
		names[id] = UniqueName(id)
	}
	tbls := tables(t, names, logicalIDs)
	if tbls == nil || !create(t, c, tbls) {
		return nil
	}
	return names
}

// create creates tbls on c's endpoint and waits until they are ACTIVE,
// deleting them when the test ends. It fails t, and returns false, when
// that does not succeed within createTimeout.
func create(t testing.TB, c *dynamodb.Client, tbls []infra.Table) bool {
	t.Helper()
	// Registered first, so that a table created before a failure goes too.
	t.Cleanup(func() {
		for _, tb := range tbls {
			_, _ = c.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: tb.Input.TableName})
		}
	})
	ctx, cancel := context.WithTimeout(t.Context(), createTimeout)
	defer cancel()
	if _, err := infra.EnsureTables(ctx, c, tbls); err != nil {
		names := make([]string, len(tbls))
		for i, tb := range tbls {
			names[i] = aws.ToString(tb.Input.TableName)
		}
		t.Fatalf("dynamotest: create tables %v: %v", names, err)
		return false
	}
	return true
}

// IdempotencyTableID is the logical id of the idempotency table in
// template.yaml, and the one table CreateTables creates without it.
const IdempotencyTableID = "IdempotencyTable"

// IdempotencyTable creates an idempotency table with the schema built into
// pkg/dynamostore (dynamostore.TableInput, with TTL on expires_at: the
// schema of this repository's template.yaml, which a test holds it to) on
// c's endpoint under a UniqueName, waits until it is ACTIVE and returns
// its name; the table is deleted when the test ends. It never reads a
// template, so it works in any module and beside any template.yaml:
//
//	client := dynamotest.Client(t)
//	store, err := dynamostore.New(client, dynamostore.Options{Table: dynamotest.IdempotencyTable(t, client)})
func IdempotencyTable(t testing.TB, c *dynamodb.Client) string {
	t.Helper()
	name := UniqueName(IdempotencyTableID)
	tbls := builtinTables(map[string]string{IdempotencyTableID: name}, []string{IdempotencyTableID})
	if !create(t, c, tbls) {
		return ""
	}
	return name
}

// ClassicIdempotencyTable is IdempotencyTable with the classic key schema
// (dynamostore.ClassicTableInput: partition key pk alone, and the ref
// index), which tables created before v0.2.0 keep.
func ClassicIdempotencyTable(t testing.TB, c *dynamodb.Client) string {
	t.Helper()
	name := UniqueName(IdempotencyTableID + "-classic")
	if !create(t, c, []infra.Table{{LogicalID: IdempotencyTableID, Input: dynamostore.ClassicTableInput(name),
		TTLAttribute: dynamostore.DefaultAttributes().ExpiresAt}}) {
		return ""
	}
	return name
}

// builtinTables returns the built-in tables for logicalIDs, or nil when
// one of them is not built in.
func builtinTables(names map[string]string, logicalIDs []string) []infra.Table {
	out := make([]infra.Table, 0, len(logicalIDs))
	for _, id := range logicalIDs {
		if id != IdempotencyTableID {
			return nil
		}
		out = append(out, infra.Table{
			LogicalID:    id,
			Input:        dynamostore.TableInput(names[id]),
			TTLAttribute: dynamostore.DefaultAttributes().ExpiresAt,
		})
	}
	return out
}
