package dynamostore_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambda-dedupe/dedupe/localtest/dynamotest"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/dynamostore"
)

// bodyOf returns n bytes of JSON-like text that gzip shrinks only partly.
func bodyOf(n int) []byte {
	var b bytes.Buffer
	for i := 0; b.Len() < n; i++ {
		b.WriteString(`{"id":"` + rand.Text() + `","n":` + strconv.Itoa(i) + `},`)
	}
	return b.Bytes()[:n]
}

// TestBodyItem: a body that would push the record past one write unit is
// kept in an item of its own, written before the completion, expiring an
// hour after the record; the record names its size and SHA-256. Replays,
// Get and Inspect read it byte for byte; small bodies stay inline.
func TestBodyItem(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	for _, lean := range []bool{false, true} {
		for _, n := range []int{300, 900, 1500, 4 << 10, 10 << 10, 100 << 10} {
			t.Run("lean="+strconv.FormatBool(lean)+"/"+strconv.Itoa(n), func(t *testing.T) {
				s := r.store(t, dynamostore.Options{Lean: lean})
				g := dedupe.New(s, &dedupe.Config{Prefix: "body", Now: (&clock{now: base}).Now})
				want := dedupe.Result{StatusCode: 201, Headers: map[string][]string{"Content-Type": {"application/json"}}, Body: bodyOf(n)}
				key := rand.Text()
				out, err := g.Do(ctx, dedupe.Call{Key: key, Fingerprint: "fp"}, func(context.Context) (dedupe.Result, error) { return want, nil })
				if err != nil || !out.Stored {
					t.Fatal(out, err)
				}
				item := r.rawItem(t, g.Key(key))
				_, inline := item["res_body"]
				_, split := item["res_item"]
				if wantSplit := dynamostore.ItemSize(item) > dynamostore.WriteUnitBytes || split; inline == wantSplit || split != wantSplit {
					t.Errorf("record of %d bytes: res_body %v, res_item %v", dynamostore.ItemSize(item), inline, split)
				}
				if split {
					if size := dynamostore.ItemSize(item); size > dynamostore.WriteUnitBytes {
						t.Errorf("record with its body apart is %d bytes, over a write unit", size)
					}
					tok := item["owner"].(*types.AttributeValueMemberS).Value
					body := r.rawItem(t, dynamostore.BodyItemKey(g.Key(key), tok))
					exp, _ := strconv.ParseInt(body["expires_at"].(*types.AttributeValueMemberN).Value, 10, 64)
					recExp, _ := strconv.ParseInt(item["expires_at"].(*types.AttributeValueMemberN).Value, 10, 64)
					if len(body) == 0 || exp != recExp+3600 {
						t.Errorf("body item %v expires at %d, want an hour after the record's %d", body["pk"], exp, recExp)
					}
				}
				got, err := g.Do(ctx, dedupe.Call{Key: key, Fingerprint: "fp"}, func(context.Context) (dedupe.Result, error) { t.Error("replay ran"); return want, nil })
				if err != nil || !got.Replayed || !bytes.Equal(got.Result.Body, want.Body) || got.Result.Headers["Content-Type"][0] != "application/json" {
					t.Fatalf("replay: %v, %v", got.Replayed, err)
				}
				rec, err := s.Get(ctx, g.Key(key), base)
				if err != nil || !bytes.Equal(rec.Result.Body, want.Body) {
					t.Errorf("Get: %v", err)
				}
				ins, err := s.Inspect(ctx, g.Key(key), base)
				if err != nil || ins.BodyErr != nil || !bytes.Equal(ins.Result.Body, want.Body) {
					t.Errorf("Inspect: %v, %v", err, ins.BodyErr)
				}
			})
		}
	}
}

// TestInlineBodies: with Options.InlineBodies every body stays in its
// record, as before body items; a record naming a body item is still
// read, and a version without body items refuses one (its encoding is
// unknown to it) rather than replay an empty body.
func TestInlineBodies(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	split := r.store(t, dynamostore.Options{})
	inline := r.store(t, dynamostore.Options{InlineBodies: true})
	want := dedupe.Result{StatusCode: 200, Body: bodyOf(3000)}
	for _, s := range []*dynamostore.Store{inline, split} {
		key := rand.Text()
		if res, err := s.Claim(ctx, lifeClaim(key, "t", base)); err != nil || !res.Acquired {
			t.Fatal(res, err)
		}
		if err := s.Complete(ctx, dedupe.CompleteRequest{Key: key, Token: "t", Result: want, Now: base, ExpiresAt: base.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		item := r.rawItem(t, key)
		_, hasItem := item["res_item"]
		_, hasBody := item["res_body"]
		if hasItem == (s == inline) || hasBody != (s == inline) {
			t.Errorf("InlineBodies %v: res_item %v, res_body %v", s == inline, hasItem, hasBody)
		}
		if enc := item["res_encoding"].(*types.AttributeValueMemberS).Value; hasItem && enc != "item:identity" && enc != "item:gzip" {
			t.Errorf("a body item's record has encoding %q, want item:… (unknown to earlier versions)", enc)
		}
		for _, reader := range []*dynamostore.Store{inline, split} {
			if rec, err := reader.Get(ctx, key, base); err != nil || !bytes.Equal(rec.Result.Body, want.Body) {
				t.Errorf("Get: %v", err)
			}
		}
	}
}

// TestBodyItemFaults: a body item that is missing, altered or unreadable
// is never answered: the record still is (the mismatch for another
// request, ErrResultOmitted or ErrResultUnreadable for this one), and
// Inspect shows the record with the read's error. A body item with no
// record is no record; a record completed inline by an earlier version
// still replays; a stale owner's completion after a takeover writes an
// orphan body item that nothing names.
func TestBodyItemFaults(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	s := r.store(t, dynamostore.Options{})
	want := dedupe.Result{StatusCode: 200, Body: bodyOf(3000)}
	complete := func(t *testing.T) (key, tok string) {
		t.Helper()
		key, tok = rand.Text(), rand.Text()
		if res, err := s.Claim(ctx, lifeClaim(key, tok, base)); err != nil || !res.Acquired {
			t.Fatal(res, err)
		}
		if err := s.Complete(ctx, dedupe.CompleteRequest{Key: key, Token: tok, Result: want, Now: base, ExpiresAt: base.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		if _, ok := r.rawItem(t, key)["res_item"]; !ok {
			t.Fatal("the body is inline")
		}
		return key, tok
	}
	bodyKey := func(key, tok string) map[string]types.AttributeValue {
		return r.key(dynamostore.BodyItemKey(key, tok))
	}
	t.Run("missing", func(t *testing.T) {
		key, tok := complete(t)
		if _, err := r.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(r.table), Key: bodyKey(key, tok)}); err != nil {
			t.Fatal(err)
		}
		res, err := s.Claim(ctx, lifeClaim(key, "other", base))
		if !errors.Is(err, dedupe.ErrResultOmitted) || res.Record.Status != dedupe.StatusCompleted || res.Record.Result != nil {
			t.Errorf("Claim = %+v, %v; want the record without its result, ErrResultOmitted", res, err)
		}
		if errors.Is(err, dedupe.ErrStoreUnavailable) {
			t.Errorf("Claim = %v: unavailable, on which FailOpen would run", err)
		}
		g := dedupe.New(s, &dedupe.Config{Unprefixed: true, Now: func() time.Time { return base }})
		if _, err := g.Do(ctx, dedupe.Call{Key: key, Fingerprint: "other-fp"}, func(context.Context) (dedupe.Result, error) { return want, nil }); !errors.Is(err, dedupe.ErrFingerprintMismatch) {
			t.Errorf("another request: %v, want the mismatch", err)
		}
		ins, err := s.Inspect(ctx, key, base)
		if err != nil || !errors.Is(ins.BodyErr, dedupe.ErrResultOmitted) || ins.Result == nil || ins.Result.Body != nil || ins.Result.StatusCode != 200 {
			t.Errorf("Inspect = %+v, %v; want the record, its body's error beside it", ins, err)
		}
	})
	t.Run("altered", func(t *testing.T) {
		key, tok := complete(t)
		// One byte flipped: the same size, another SHA-256.
		stored := bytes.Clone(r.rawItem(t, dynamostore.BodyItemKey(key, tok))["res_body"].(*types.AttributeValueMemberB).Value)
		stored[len(stored)/2] ^= 1
		if _, err := r.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(r.table), Key: bodyKey(key, tok),
			UpdateExpression:          aws.String("SET res_body = :b"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":b": &types.AttributeValueMemberB{Value: stored}}}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Get(ctx, key, base); !errors.Is(err, dedupe.ErrResultOmitted) || !errors.Is(err, dynamostore.ErrObjectInvalid) {
			t.Errorf("Get = %v, want ErrResultOmitted, ErrObjectInvalid", err)
		}
	})
	t.Run("unreadable", func(t *testing.T) {
		key, _ := complete(t)
		reads := 0
		fs, err := dynamostore.New(faultClient{Client: r.client, fail: func(op string) error {
			if op == "GetItem" {
				if reads++; reads == 2 { // the record's read, then the body's
					return errors.New("connection reset")
				}
			}
			return nil
		}}, dynamostore.Options{Table: r.table})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fs.Get(ctx, key, base); !errors.Is(err, dedupe.ErrResultUnreadable) || errors.Is(err, dedupe.ErrStoreUnavailable) {
			t.Errorf("Get = %v, want ErrResultUnreadable, never unavailable", err)
		}
	})
	t.Run("an eventually consistent read that misses", func(t *testing.T) {
		key, _ := complete(t)
		var reads []bool
		lagging, err := dynamostore.New(staleReads{Client: r.client, reads: &reads}, dynamostore.Options{Table: r.table})
		if err != nil {
			t.Fatal(err)
		}
		rec, err := lagging.Get(ctx, key, base)
		if err != nil || !bytes.Equal(rec.Result.Body, want.Body) {
			t.Fatalf("Get = %v; want the body from the strongly consistent read", err)
		}
		if want := []bool{true, false, true}; !slices.Equal(reads, want) {
			t.Errorf("reads (consistent?) = %v, want %v: the record, the body item eventually, then strongly", reads, want)
		}
	})
	t.Run("body item without its record", func(t *testing.T) {
		key, _ := complete(t)
		if _, err := r.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(r.table), Key: r.key(key)}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Get(ctx, key, base); !errors.Is(err, dedupe.ErrNotFound) {
			t.Errorf("Get = %v, want ErrNotFound", err)
		}
		if res, err := s.Claim(ctx, lifeClaim(key, "again", base)); err != nil || !res.Acquired || res.Record.FirstToken != "again" {
			t.Errorf("Claim = %+v, %v; want a fresh claim", res, err)
		}
	})
	t.Run("expired record", func(t *testing.T) {
		key, _ := complete(t)
		later := base.Add(2 * time.Hour) // past the record's expiry, inside its body item's
		if _, err := s.Get(ctx, key, later); !errors.Is(err, dedupe.ErrNotFound) {
			t.Errorf("Get = %v, want ErrNotFound", err)
		}
		res, err := s.Claim(ctx, lifeClaim(key, "new-life", later))
		if err != nil || !res.Acquired || res.Record.FirstToken != "new-life" {
			t.Errorf("Claim = %+v, %v; want a new life", res, err)
		}
		if _, ok := r.rawItem(t, key)["res_item"]; ok {
			t.Error("the new life's record still names the old body item")
		}
	})
	t.Run("expired record whose body item is gone", func(t *testing.T) {
		// Its result is not needed: the claim starts the new life in the
		// same call, rather than answer nothing and be claimed again (a
		// second claim that fails for want of the store would run the
		// work unguarded with FailOpen, after the store had answered).
		key, tok := complete(t)
		if _, err := r.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(r.table), Key: bodyKey(key, tok)}); err != nil {
			t.Fatal(err)
		}
		later := base.Add(2 * time.Hour)
		res, err := s.Claim(ctx, lifeClaim(key, "new-life", later))
		if err != nil || !res.Acquired || res.Record.FirstToken != "new-life" {
			t.Errorf("Claim = %+v, %v; want the new life, acquired", res, err)
		}
	})
	t.Run("inline record of an earlier version", func(t *testing.T) {
		key, tok := complete(t)
		body := r.rawItem(t, dynamostore.BodyItemKey(key, tok))["res_body"]
		enc, _ := strings.CutPrefix(r.rawItem(t, key)["res_encoding"].(*types.AttributeValueMemberS).Value, "item:")
		if _, err := r.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(r.table), Key: r.key(key),
			UpdateExpression:          aws.String("SET res_body = :b, res_encoding = :e REMOVE res_item"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":b": body, ":e": &types.AttributeValueMemberS{Value: enc}}}); err != nil {
			t.Fatal(err)
		}
		if _, err := r.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(r.table), Key: bodyKey(key, tok)}); err != nil {
			t.Fatal(err)
		}
		res, err := s.Claim(ctx, lifeClaim(key, "dup", base))
		if err != nil || res.Acquired || res.Record.Result == nil || !bytes.Equal(res.Record.Result.Body, want.Body) {
			t.Errorf("Claim = %+v, %v; want the inline result", res.Acquired, err)
		}
	})
	t.Run("stale owner after a takeover", func(t *testing.T) {
		key := rand.Text()
		if res, err := s.Claim(ctx, lifeClaim(key, "tok-a", base)); err != nil || !res.Acquired {
			t.Fatal(res, err)
		}
		later := base.Add(2 * time.Minute)
		if res, err := s.Claim(ctx, lifeClaim(key, "tok-b", later)); err != nil || !res.Acquired {
			t.Fatal(res, err)
		}
		winner := dedupe.Result{StatusCode: 201, Body: bodyOf(2000)}
		if err := s.Complete(ctx, dedupe.CompleteRequest{Key: key, Token: "tok-b", Result: winner, Now: later, ExpiresAt: later.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		err := s.Complete(ctx, dedupe.CompleteRequest{Key: key, Token: "tok-a", Result: want, Now: later, ExpiresAt: later.Add(time.Hour)})
		if !errors.Is(err, dedupe.ErrLeaseLost) {
			t.Errorf("stale Complete = %v, want ErrLeaseLost", err)
		}
		rec, err := s.Get(ctx, key, later)
		if err != nil || !bytes.Equal(rec.Result.Body, winner.Body) || rec.Token != "tok-b" {
			t.Errorf("Get = %v; want the winner's body", err)
		}
	})
}

// staleReads answers every eventually consistent GetItem with nothing, as
// a replica that has not yet seen a write does, and records each read's
// consistency.
type staleReads struct {
	dynamostore.Client
	reads *[]bool
}

func (c staleReads) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	*c.reads = append(*c.reads, aws.ToBool(in.ConsistentRead))
	if !aws.ToBool(in.ConsistentRead) {
		return &dynamodb.GetItemOutput{}, nil
	}
	return c.Client.GetItem(ctx, in, o...)
}

// TestBodyItemSingleTable: in a single-table design (a fixed sort key,
// renamed attributes), the body item carries the same sort key value and
// the renamed attributes, and replays.
func TestBodyItemSingleTable(t *testing.T) {
	c := testClient(t)
	table := dynamotest.UniqueName("dedupe-single-body")
	attrs := dynamostore.Attributes{PartitionKey: "PK", Status: "st", Owner: "own", LeaseExpiresAt: "lease_ms",
		ExpiresAt: "ttl", InflightShard: "GSI1PK", ResBody: "body"}
	createTable(t, c, table, schema{pk: "PK", sk: "SK", shard: "GSI1PK", lease: "lease_ms", index: "GSI1",
		projectedKeys: []string{"own", "st", "created_at"}})
	s, err := dynamostore.New(c, dynamostore.Options{Table: table, SortKey: dynamostore.SortKey{Name: "SK", Value: "IDEMPOTENCY"},
		Attributes: attrs, Index: "GSI1"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	key, want := rand.Text(), dedupe.Result{StatusCode: 200, Body: bodyOf(5000)}
	if res, err := s.Claim(ctx, lifeClaim(key, "t", base)); err != nil || !res.Acquired {
		t.Fatal(res, err)
	}
	if err := s.Complete(ctx, dedupe.CompleteRequest{Key: key, Token: "t", Result: want, Now: base, ExpiresAt: base.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	out, err := c.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true), Key: map[string]types.AttributeValue{
		"PK": &types.AttributeValueMemberS{Value: dynamostore.BodyItemKey(key, "t")}, "SK": &types.AttributeValueMemberS{Value: "IDEMPOTENCY"}}})
	if err != nil || out.Item["body"] == nil || out.Item["own"] == nil || out.Item["ttl"] == nil {
		t.Fatalf("body item: %v, %v; want body, own and ttl under the sort key", out, err)
	}
	if rec, err := s.Get(ctx, key, base); err != nil || !bytes.Equal(rec.Result.Body, want.Body) {
		t.Errorf("Get: %v", err)
	}
}
