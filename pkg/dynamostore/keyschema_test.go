package dynamostore_test

import (
	"context"
	"crypto/rand"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/lambda-dedupe/dedupe/localtest/dynamoserver"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/dynamostore"
)

func keys(elems ...string) []types.KeySchemaElement {
	var out []types.KeySchemaElement
	for i := 0; i < len(elems); i += 2 {
		out = append(out, types.KeySchemaElement{AttributeName: aws.String(elems[i]), KeyType: types.KeyType(elems[i+1])})
	}
	return out
}

// TestKeySchemaDetect judges the table's KeySchema at New: classic,
// keyed by reference, or refused naming what was found and what is
// expected; an Options.KeySchema that contradicts the table is refused.
func TestKeySchemaDetect(t *testing.T) {
	renamed := dynamostore.Attributes{PartitionKey: "K", Ref: "R"}
	tests := []struct {
		name   string
		keys   []types.KeySchemaElement
		opts   dynamostore.Options
		want   dynamostore.KeySchema // KeySchemaDetect: refused
		naming []string              // what the refusal names
	}{
		{"classic", keys("pk", "HASH"), dynamostore.Options{}, dynamostore.KeySchemaClassic, nil},
		{"keyed by reference", keys("ref", "HASH", "pk", "RANGE"), dynamostore.Options{}, dynamostore.KeySchemaByRef, nil},
		{"keyed by reference, listed range first", keys("pk", "RANGE", "ref", "HASH"), dynamostore.Options{}, dynamostore.KeySchemaByRef, nil},
		{"classic with a sort key", keys("pk", "HASH", "sk", "RANGE"), dynamostore.Options{SortKey: dynamostore.SortKey{Name: "sk", Value: "v"}}, dynamostore.KeySchemaClassic, nil},
		{"renamed, keyed by reference", keys("R", "HASH", "K", "RANGE"), dynamostore.Options{Attributes: renamed}, dynamostore.KeySchemaByRef, nil},
		{"renamed, classic", keys("K", "HASH"), dynamostore.Options{Attributes: renamed}, dynamostore.KeySchemaClassic, nil},
		{"renamed attributes on a default table", keys("ref", "HASH", "pk", "RANGE"), dynamostore.Options{Attributes: renamed}, 0, []string{`HASH "ref"`, `HASH "R" and RANGE "K"`}},
		{"neither", keys("id", "HASH"), dynamostore.Options{}, 0, []string{`HASH "id"`, `HASH "pk" alone`, `HASH "ref" and RANGE "pk"`}},
		{"ref without its range", keys("ref", "HASH"), dynamostore.Options{}, 0, []string{`HASH "ref"`, "keyed by reference"}},
		{"swapped", keys("pk", "HASH", "ref", "RANGE"), dynamostore.Options{}, 0, []string{`RANGE "ref"`}},
		{"classic key with an unexpected range", keys("pk", "HASH", "sk", "RANGE"), dynamostore.Options{}, 0, []string{`RANGE "sk"`, "Options.SortKey"}},
		{"sort key option on a table without one", keys("pk", "HASH"), dynamostore.Options{SortKey: dynamostore.SortKey{Name: "sk", Value: "v"}}, 0, []string{`RANGE "sk"`}},
		{"sort key option on a table keyed by reference", keys("ref", "HASH", "pk", "RANGE"), dynamostore.Options{SortKey: dynamostore.SortKey{Name: "sk", Value: "v"}}, 0, []string{"SortKey", "keyed by reference"}},
		{"no key schema", nil, dynamostore.Options{}, 0, []string{"no KeySchema"}},
		{"classic stated, keyed by reference found", keys("ref", "HASH", "pk", "RANGE"), dynamostore.Options{KeySchema: dynamostore.KeySchemaClassic}, 0, []string{"KeySchemaClassic", "KeySchemaByRef"}},
		{"keyed by reference stated, classic found", keys("pk", "HASH"), dynamostore.Options{KeySchema: dynamostore.KeySchemaByRef}, 0, []string{"KeySchemaClassic", "KeySchemaByRef"}},
		{"classic stated and found", keys("pk", "HASH"), dynamostore.Options{KeySchema: dynamostore.KeySchemaClassic}, dynamostore.KeySchemaClassic, nil},
		{"ref index on a table keyed by reference", keys("ref", "HASH", "pk", "RANGE"), dynamostore.Options{RefIndex: "ref"}, 0, []string{"RefIndex"}},
		{"ref index on a classic table", keys("pk", "HASH"), dynamostore.Options{RefIndex: "byref"}, dynamostore.KeySchemaClassic, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			table := &types.TableDescription{TableName: aws.String("t"), KeySchema: tt.keys}
			if table.KeySchema == nil {
				table.KeySchema = []types.KeySchemaElement{}
			}
			opts := tt.opts
			opts.Table = "t"
			s, err := dynamostore.New(&describeStub{table: table}, opts)
			if tt.want == dynamostore.KeySchemaDetect {
				if !errors.Is(err, dynamostore.ErrInvalidOptions) {
					t.Fatalf("New = %v, want ErrInvalidOptions", err)
				}
				for _, n := range tt.naming {
					if !strings.Contains(err.Error(), n) {
						t.Errorf("refusal %q does not name %s", err, n)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("New = %v, want %v", err, tt.want)
			}
			if got := s.KeySchema(); got != tt.want {
				t.Errorf("KeySchema() = %v, want %v", got, tt.want)
			}
		})
	}
}

// itemCalls is a client whose DescribeTable fails as err says (nil: the
// table is keyed by reference) and that fails the test on any other
// call: no call may go out before the key schema is known.
type itemCalls struct {
	dynamostore.Client
	t   *testing.T
	err error
}

func (c *itemCalls) DescribeTable(context.Context, *dynamodb.DescribeTableInput, ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	if c.err != nil {
		return nil, c.err
	}
	return &dynamodb.DescribeTableOutput{Table: &types.TableDescription{KeySchema: byRefKeys}}, nil
}

func (c *itemCalls) fail(op string) error {
	c.t.Errorf("%s sent before the key schema was known", op)
	return errors.New("unexpected call")
}

func (c *itemCalls) GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return nil, c.fail("GetItem")
}

func (c *itemCalls) PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return nil, c.fail("PutItem")
}

func (c *itemCalls) UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return nil, c.fail("UpdateItem")
}

func (c *itemCalls) Query(context.Context, *dynamodb.QueryInput, ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	return nil, c.fail("Query")
}

func (c *itemCalls) DeleteItem(context.Context, *dynamodb.DeleteItemInput, ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	return nil, c.fail("DeleteItem")
}

// TestKeySchemaDeferred: a DescribeTable throttled at New leaves the key
// schema unknown, and every call of the store answers unavailable
// without sending anything but DescribeTable; a denied one refuses New.
func TestKeySchemaDeferred(t *testing.T) {
	c := &itemCalls{t: t, err: &smithy.GenericAPIError{Code: "ThrottlingException"}}
	s, err := dynamostore.New(c, dynamostore.Options{Table: "t", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("New during a blip = %v, want accepted", err)
	}
	if got := s.KeySchema(); got != dynamostore.KeySchemaDetect {
		t.Errorf("KeySchema() during the blip = %v, want KeySchemaDetect (unknown)", got)
	}
	ctx := context.Background()
	k := "k"
	calls := map[string]func() error{
		"Claim": func() error {
			_, err := s.Claim(ctx, dedupe.ClaimRequest{Key: k, Fingerprint: "f", Token: "t", Now: base, LeaseUntil: base.Add(time.Minute), ExpiresAt: base.Add(time.Hour)})
			return err
		},
		"Get": func() error { _, err := s.Get(ctx, k, base); return err },
		"Complete": func() error {
			return s.Complete(ctx, dedupe.CompleteRequest{Key: k, Token: "t", Now: base, ExpiresAt: base.Add(time.Hour), Result: dedupe.Result{StatusCode: 200}})
		},
		"Release": func() error { return s.Release(ctx, k, "t") },
		"Extend": func() error {
			return s.Extend(ctx, dedupe.ExtendRequest{Key: k, Token: "t", Now: base, LeaseUntil: base.Add(time.Minute), ExpiresAt: base.Add(time.Hour)})
		},
		"ReleaseSeen": func() error {
			return s.ReleaseSeen(ctx, dedupe.Record{Key: k, Token: "t", Status: dedupe.StatusInProgress, LeaseExpiresAt: base})
		},
		"Forget":     func() error { return s.Forget(ctx, k, "t") },
		"FindRef":    func() error { _, err := s.FindRef(ctx, dedupe.KeyRef(k), base); return err },
		"InspectRef": func() error { _, err := s.InspectRef(ctx, dedupe.KeyRef(k), base); return err },
		"Inspect":    func() error { _, err := s.Inspect(ctx, k, base); return err },
		"InFlight":   func() error { _, _, err := s.InFlight(ctx, base, 10); return err },
		"Reap": func() error {
			_, err := s.Reap(ctx, dynamostore.ReapOptions{Now: func() time.Time { return base }})
			return err
		},
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, dedupe.ErrStoreUnavailable) {
			t.Errorf("%s while the key schema is unknown = %v, want ErrStoreUnavailable", name, err)
		}
	}
	c.err = &smithy.GenericAPIError{Code: "AccessDeniedException", Message: "no dynamodb:DescribeTable"}
	if _, err := dynamostore.New(c, dynamostore.Options{Table: "t"}); err == nil || errors.Is(err, dedupe.ErrStoreUnavailable) ||
		!strings.Contains(err.Error(), "KeySchema") {
		t.Errorf("New with DescribeTable denied = %v, want a refusal naming Options.KeySchema", err)
	}
}

// TestWrongKeySchemaIsNotUnavailable: a store told the wrong key shape
// (GlobalTablesUnchecked with a KeySchema the table does not have) meets
// DynamoDB's ValidationException on every call, which is a failure,
// never dedupe.ErrStoreUnavailable: a FailOpen guard does not run the
// work, and no item is written. (moto accepts an extra key attribute on
// a classic table; there the claim stays conditional.)
func TestWrongKeySchemaIsNotUnavailable(t *testing.T) {
	for name, r := range rigs(t) {
		t.Run(name, func(t *testing.T) {
			wrong := dynamostore.KeySchemaClassic
			if r.classic {
				wrong = dynamostore.KeySchemaByRef
			}
			s, err := dynamostore.New(r.client, dynamostore.Options{Table: r.table, GlobalTables: dynamostore.GlobalTablesUnchecked, KeySchema: wrong})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			key := "wrong-" + rand.Text()
			_, err = s.Claim(ctx, dedupe.ClaimRequest{Key: key, Fingerprint: "f", Token: "t", Now: base, LeaseUntil: base.Add(time.Minute), ExpiresAt: base.Add(time.Hour)})
			if err == nil && r.classic && dynamoserver.ServerKind() == dynamoserver.Moto {
				// moto, unlike DynamoDB and dynalite, accepts a key with an
				// extra attribute on a classic table and files the item
				// under pk: the claim is still conditional, so a second
				// one is refused.
				res, err := s.Claim(ctx, dedupe.ClaimRequest{Key: key, Fingerprint: "f", Token: "u", Now: base, LeaseUntil: base.Add(time.Minute), ExpiresAt: base.Add(time.Hour)})
				if err != nil || res.Acquired {
					t.Errorf("second Claim on moto = %+v, %v; want refused", res, err)
				}
				return
			}
			var apiErr smithy.APIError
			if err == nil || errors.Is(err, dedupe.ErrStoreUnavailable) || !errors.As(err, &apiErr) || apiErr.ErrorCode() != "ValidationException" {
				t.Errorf("Claim with the wrong key schema = %v, want a ValidationException, not ErrStoreUnavailable", err)
			}
			if _, err := s.Get(ctx, key, base); err == nil || errors.Is(err, dedupe.ErrStoreUnavailable) {
				t.Errorf("Get with the wrong key schema = %v, want a failure, not ErrStoreUnavailable", err)
			}
			g := dedupe.New(s, &dedupe.Config{Prefix: "wrong", FailOpen: true, Now: (&clock{now: base}).Now, Logger: slog.New(slog.DiscardHandler)})
			runs := 0
			if _, err := g.Do(ctx, dedupe.Call{Key: key, Fingerprint: "f"}, func(context.Context) (dedupe.Result, error) {
				runs++
				return dedupe.Result{StatusCode: 200}, nil
			}); err == nil || runs != 0 {
				t.Errorf("FailOpen guard on the wrong key schema = %v after %d runs; want an error, no run", err, runs)
			}
			if item := r.rawItem(t, key); len(item) != 0 {
				t.Errorf("an item was written: %v", item)
			}
		})
	}
}

// TestLongKeysKeyedByReference holds a table keyed by reference to
// DynamoDB's 1024-byte sort key limit: the server refuses a longer sort
// key, and the store keeps every key up to dedupe.MaxStoreKeyBytes (the
// guard's longest is 1032 bytes), at and around the boundary where it
// starts to shorten them, through every operation: claim, complete, get,
// find by reference, in flight, reap and release.
func TestLongKeysKeyedByReference(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	// The server's limit, which the shortening exists for.
	over := strings.Repeat("s", 1025)
	_, err := r.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(r.table), Item: map[string]types.AttributeValue{
		"ref": &types.AttributeValueMemberS{Value: dedupe.KeyRef(over)}, "pk": &types.AttributeValueMemberS{Value: over}}})
	var apiErr smithy.APIError
	if !errors.As(err, &apiErr) || apiErr.ErrorCode() != "ValidationException" {
		t.Errorf("PutItem with a 1025-byte sort key = %v, want a ValidationException (DynamoDB's limit)", err)
	}
	s := r.store(t, dynamostore.Options{})
	for _, n := range []int{dynamostore.MaxPlainSortKey, dynamostore.MaxPlainSortKey + 1, 1024, 1025, 1032, dedupe.MaxStoreKeyBytes} {
		prefix := "long/" + rand.Text() + "/"
		key := prefix + strings.Repeat("é", (n-len(prefix))/2)
		key += strings.Repeat("x", n-len(key))
		if len(key) != n {
			t.Fatalf("built a %d-byte key, want %d", len(key), n)
		}
		if sk := dynamostore.SortKeyValue(key); len(sk) > 1024 || (n <= dynamostore.MaxPlainSortKey) != (sk == key) {
			t.Errorf("%d bytes: sort key of %d bytes (kept as is: %v)", n, len(sk), sk == key)
		}
		if _, err := s.Claim(ctx, dedupe.ClaimRequest{Key: key, Fingerprint: "f", Token: "a", Now: base, LeaseUntil: base.Add(time.Second), ExpiresAt: base.Add(time.Hour)}); err != nil {
			t.Fatalf("%d bytes: Claim: %v", n, err)
		}
		recs, err := s.FindRef(ctx, dedupe.KeyRef(key), base)
		if err != nil || len(recs) != 1 || recs[0].Key != key {
			t.Errorf("%d bytes: FindRef = %d records, %v; want the record under its full key", n, len(recs), err)
		}
		inflight, _, err := s.InFlight(ctx, base, 1000)
		found := false
		for _, rec := range inflight {
			found = found || rec.Key == key
		}
		if err != nil || !found {
			t.Errorf("%d bytes: InFlight = %d records, %v; want the record under its full key", n, len(inflight), err)
		}
		rep, err := s.Reap(ctx, dynamostore.ReapOptions{Now: func() time.Time { return base.Add(time.Hour / 2) }, Grace: time.Nanosecond})
		if err != nil || rep.Errors != 0 || rep.Cleared == 0 {
			t.Errorf("%d bytes: Reap = %+v, %v; want the stranded record cleared", n, rep, err)
		}
		later := base.Add(time.Minute)
		res, err := s.Claim(ctx, dedupe.ClaimRequest{Key: key, Fingerprint: "f", Token: "b", Now: later, LeaseUntil: later.Add(time.Minute), ExpiresAt: later.Add(time.Hour)})
		if err != nil || !res.Acquired || res.Record.Key != key {
			t.Fatalf("%d bytes: takeover = %+v, %v", n, res, err)
		}
		if err := s.Complete(ctx, dedupe.CompleteRequest{Key: key, Token: "b", Now: later, ExpiresAt: later.Add(time.Hour),
			Result: dedupe.Result{StatusCode: 201, Body: []byte(strings.Repeat("b", 2000))}}); err != nil {
			t.Fatalf("%d bytes: Complete: %v", n, err)
		}
		if rec, err := s.Get(ctx, key, later); err != nil || rec.Key != key || rec.Result == nil || len(rec.Result.Body) != 2000 {
			t.Errorf("%d bytes: Get = %+v, %v; want the completed record under its full key", n, rec.Key == key, err)
		}
		if got, err := s.Inspect(ctx, key, later); err != nil || got.Key != key {
			t.Errorf("%d bytes: Inspect = %v, %v", n, got.Key == key, err)
		}
		_, longKey := r.rawItem(t, key)["long_key"]
		if longKey != (n > dynamostore.MaxPlainSortKey) {
			t.Errorf("%d bytes: long_key stored %v, want %v", n, longKey, n > dynamostore.MaxPlainSortKey)
		}
	}
}

// TestFindRefSharedReference: two keys whose references collide (forced
// with a test hook; 48-bit references collide by chance or planted) are
// two items, kept apart by the sort key, and FindRef lists both; each is
// read, completed and forgotten on its own. A body item in the shared
// partition (none is there but by a collision too) is not listed.
func TestFindRefSharedReference(t *testing.T) {
	for name, r := range rigs(t) {
		t.Run(name, func(t *testing.T) {
			s := r.store(t, dynamostore.Options{})
			ctx := context.Background()
			a := "shared/" + rand.Text()
			b := "shared/" + rand.Text()
			bodyA := dynamostore.BodyItemKey(a, "a")
			dynamostore.SetRefOf(s, func(k string) string {
				if k == b || k == bodyA {
					return dedupe.KeyRef(a)
				}
				return dedupe.KeyRef(k)
			})
			big := make([]byte, 5000) // incompressible: a body item
			rand.Read(big)
			for i, k := range []string{a, b} {
				if _, err := s.Claim(ctx, dedupe.ClaimRequest{Key: k, Fingerprint: "f", Token: "a", Now: base, LeaseUntil: base.Add(time.Minute), ExpiresAt: base.Add(time.Hour)}); err != nil {
					t.Fatal(err)
				}
				if err := s.Complete(ctx, dedupe.CompleteRequest{Key: k, Token: "a", Now: base, ExpiresAt: base.Add(time.Hour),
					Result: dedupe.Result{StatusCode: 200 + i, Body: big}}); err != nil {
					t.Fatal(err)
				}
			}
			recs, err := s.FindRef(ctx, dedupe.KeyRef(a), base)
			if err != nil || len(recs) != 2 {
				t.Fatalf("FindRef = %d records, %v; want both keys", len(recs), err)
			}
			for _, rec := range recs {
				want := map[string]int{a: 200, b: 201}[rec.Key]
				if rec.Result == nil || rec.Result.StatusCode != want || len(rec.Result.Body) != len(big) {
					t.Errorf("FindRef record %v: status %v, want %d with its body", rec.Key == a, rec.Result, want)
				}
			}
			if err := s.Forget(ctx, b, "a"); err != nil {
				t.Fatal(err)
			}
			if recs, err := s.FindRef(ctx, dedupe.KeyRef(a), base); err != nil || len(recs) != 1 || recs[0].Key != a {
				t.Errorf("FindRef after forgetting one = %d records, %v; want the other", len(recs), err)
			}
		})
	}
}
