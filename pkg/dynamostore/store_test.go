package dynamostore_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/lambda-dedupe/dedupe/infra"
	"github.com/lambda-dedupe/dedupe/localtest/dynamotest"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe/dedupetest"
	"github.com/lambda-dedupe/dedupe/pkg/dynamostore"
)

// base is the tests' clock origin, in the future so that a real table's
// TTL never removes records mid-test.
var base = time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)

// clock is a fake clock for the guard; tests advance it by hand.
type clock struct{ now time.Time }

func (c *clock) Now() time.Time          { return c.now }
func (c *clock) Advance(d time.Duration) { c.now = c.now.Add(d) }

// TestContract runs the suite on both key schemas: the template's table,
// keyed by reference, and a classic one.
func TestContract(t *testing.T) {
	for name, r := range rigs(t) {
		t.Run(name, func(t *testing.T) {
			dedupetest.Run(t, func(t *testing.T) dedupe.Store { return r.store(t, dynamostore.Options{}) })
		})
	}
}

// TestContractSingleTable runs the suite on a table with a sort key and
// renamed attributes, as a single-table design would have.
func TestContractSingleTable(t *testing.T) {
	c := testClient(t)
	table := dynamotest.UniqueName("dedupe-single")
	attrs := dynamostore.Attributes{
		PartitionKey: "PK", Status: "st", Owner: "own", LeaseExpiresAt: "lease_ms",
		ExpiresAt: "ttl", InflightShard: "GSI1PK", ResBody: "body",
	}
	createTable(t, c, table, schema{
		pk: "PK", sk: "SK", shard: "GSI1PK", lease: "lease_ms", index: "GSI1",
		projectedKeys: []string{"own", "st", "created_at"},
	})
	dedupetest.Run(t, func(t *testing.T) dedupe.Store {
		s, err := dynamostore.New(c, dynamostore.Options{
			Table: table, SortKey: dynamostore.SortKey{Name: "SK", Value: "IDEMPOTENCY"},
			Attributes: attrs, Index: "GSI1",
		})
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		return s
	})
}

func TestNew(t *testing.T) {
	c := dynamodb.New(dynamodb.Options{Region: "us-east-1"})
	tests := []struct {
		name    string
		client  dynamostore.Client
		opts    dynamostore.Options
		wantErr bool
	}{
		{"defaults", c, dynamostore.Options{Table: "t"}, false},
		{"no table", c, dynamostore.Options{}, true},
		{"nil client", nil, dynamostore.Options{Table: "t"}, true},
		{"negative shards", c, dynamostore.Options{Table: "t", Shards: -1}, true},
		{"sort key without value", c, dynamostore.Options{Table: "t", SortKey: dynamostore.SortKey{Name: "sk"}}, true},
		{"sort key", c, dynamostore.Options{Table: "t", KeySchema: dynamostore.KeySchemaClassic, SortKey: dynamostore.SortKey{Name: "sk", Value: "v"}}, false},
		{"sort key keyed by reference", c, dynamostore.Options{Table: "t", KeySchema: dynamostore.KeySchemaByRef, SortKey: dynamostore.SortKey{Name: "sk", Value: "v"}}, true},
		{"ref index keyed by reference", c, dynamostore.Options{Table: "t", KeySchema: dynamostore.KeySchemaByRef, RefIndex: "ref"}, true},
		{"ref index classic", c, dynamostore.Options{Table: "t", KeySchema: dynamostore.KeySchemaClassic, RefIndex: "ref"}, false},
		{"unchecked without a key schema", c, dynamostore.Options{Table: "t", KeySchema: dynamostore.KeySchemaDetect}, true},
		{"unknown key schema", c, dynamostore.Options{Table: "t", KeySchema: 7}, true},
		{"ref named as the key", c, dynamostore.Options{Table: "t", KeySchema: dynamostore.KeySchemaClassic, Attributes: dynamostore.Attributes{Ref: "pk"}}, true},
		{"sort key named as an attribute", c, dynamostore.Options{Table: "t", KeySchema: dynamostore.KeySchemaClassic, SortKey: dynamostore.SortKey{Name: "ref", Value: "v"}}, true},
		{"two attributes renamed alike", c, dynamostore.Options{Table: "t", Attributes: dynamostore.Attributes{Status: "s", Owner: "s"}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := tt.opts
			opts.GlobalTables = dynamostore.GlobalTablesUnchecked // no server here
			if opts.KeySchema == dynamostore.KeySchemaDetect && tt.name != "unchecked without a key schema" {
				opts.KeySchema = dynamostore.KeySchemaByRef
			}
			_, err := dynamostore.New(tt.client, opts)
			if got := err != nil; got != tt.wantErr {
				t.Fatalf("New error = %v, want error %v", err, tt.wantErr)
			}
			if err != nil && !errors.Is(err, dynamostore.ErrInvalidOptions) {
				t.Errorf("got %v, want ErrInvalidOptions", err)
			}
		})
	}
}

func TestDefaultAttributesMatchSchema(t *testing.T) {
	got := dynamostore.DefaultAttributes()
	want := dynamostore.Attributes{
		PartitionKey: "pk", Status: "status", Fingerprint: "fingerprint", Owner: "owner",
		LeaseExpiresAt: "lease_expires_at", ExpiresAt: "expires_at", CreatedAt: "created_at",
		UpdatedAt: "updated_at", ResStatus: "res_status", ResHeaders: "res_headers",
		ResBody: "res_body", ResEncoding: "res_encoding", ResOmitted: "res_omitted",
		FirstToken: "first_token", ResObject: "res_object", ResItem: "res_item", InflightShard: "inflight_shard", Ref: "ref", RequestID: "request_id", Trace: "trace",
		LongKey: "long_key",
	}
	if got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

// TestCallsPerRequest counts DynamoDB calls per guarded request with an SDK
// middleware. A duplicate costs 1 call when the conditional-check failure
// carries the existing item (DynamoDB, ALL_OLD) and 2 when it does not
// (dynalite): the fallback GetItem.
func TestCallsPerRequest(t *testing.T) {
	r := newRig(t)
	s := r.store(t, dynamostore.Options{})
	clk := &clock{now: base}
	g := dedupe.New(s, &dedupe.Config{Prefix: "calls", Now: clk.Now})
	ctx := context.Background()
	ok := func(context.Context) (dedupe.Result, error) {
		return dedupe.Result{StatusCode: 200, Body: []byte("ok")}, nil
	}

	heldKey := "held-" + rand.Text()
	if _, err := s.Claim(ctx, dedupe.ClaimRequest{
		Key: g.Key(heldKey), Fingerprint: "fp", Token: "other", Now: base,
		LeaseUntil: base.Add(time.Minute), ExpiresAt: base.Add(time.Hour),
	}); err != nil {
		t.Fatal(err)
	}
	doneKey := "done-" + rand.Text()
	if _, err := g.Do(ctx, dedupe.Call{Key: doneKey, Fingerprint: "fp"}, ok); err != nil {
		t.Fatal(err)
	}
	errFailed := errors.New("failed")
	fail := func(context.Context) (dedupe.Result, error) { return dedupe.Result{}, errFailed }
	failedKey, failedKey2 := "failed-"+rand.Text(), "failed2-"+rand.Text()
	for _, k := range []string{failedKey, failedKey2} {
		if _, err := g.Do(ctx, dedupe.Call{Key: k, Fingerprint: "fp"}, fail); !errors.Is(err, errFailed) {
			t.Fatal(err)
		}
	}

	tests := []struct {
		name      string
		key, fp   string
		wantOps   []string // with the ALL_OLD item
		fallback  string   // the extra call when the item is missing
		wantError error
	}{
		{"fresh", "fresh-" + rand.Text(), "fp", []string{"UpdateItem", "UpdateItem"}, "", nil},
		{"replay", doneKey, "fp", []string{"UpdateItem"}, "GetItem", nil},
		{"in progress", heldKey, "fp", []string{"UpdateItem"}, "GetItem", dedupe.ErrInProgress},
		{"fingerprint mismatch", doneKey, "other-fp", []string{"UpdateItem"}, "GetItem", dedupe.ErrFingerprintMismatch},
		// A retry after a failure takes the released record with its claim:
		// claim and complete.
		{"retry after a failure", failedKey, "fp", []string{"UpdateItem", "UpdateItem"}, "", nil},
		{"released, another request", failedKey2, "other-fp", []string{"UpdateItem"}, "GetItem", dedupe.ErrFingerprintMismatch},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r.calls.reset()
			_, err := g.Do(ctx, dedupe.Call{Key: tt.key, Fingerprint: tt.fp}, ok)
			if !errors.Is(err, tt.wantError) {
				t.Fatalf("Run error = %v, want %v", err, tt.wantError)
			}
			ops, withoutItem := r.calls.snapshot()
			want := tt.wantOps
			if withoutItem > 0 {
				want = append(slices.Clone(want), tt.fallback)
			}
			if !slices.Equal(ops, want) {
				t.Errorf("calls = %v, want %v", ops, want)
			}
			t.Logf("%s: %d calls %v (ALL_OLD item missing: %v)", tt.name, len(ops), ops, withoutItem > 0)
		})
	}
}

// allOldClient makes a server that ignores ALL_OLD behave like DynamoDB:
// when a conditional PutItem or UpdateItem fails without the old item, it
// reads the item through a separate, uncounted client and attaches it to
// the error. It exercises the store's one-call path for duplicates on
// dynalite.
type allOldClient struct {
	dynamostore.Client
	raw   *dynamodb.Client
	byRef bool // the table is keyed by reference
}

func (c allOldClient) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	out, err := c.Client.PutItem(ctx, in, o...)
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) && len(ccf.Item) == 0 && in.ReturnValuesOnConditionCheckFailure == types.ReturnValuesOnConditionCheckFailureAllOld {
		key := map[string]types.AttributeValue{"pk": in.Item["pk"]}
		if ref, ok := in.Item["ref"]; ok && c.byRef {
			key["ref"] = ref
		}
		got, gerr := c.raw.GetItem(ctx, &dynamodb.GetItemInput{TableName: in.TableName, Key: key, ConsistentRead: aws.Bool(true)})
		if gerr != nil {
			return nil, gerr
		}
		ccf.Item = got.Item
	}
	return out, err
}

func (c allOldClient) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	out, err := c.Client.UpdateItem(ctx, in, o...)
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) && len(ccf.Item) == 0 && in.ReturnValuesOnConditionCheckFailure == types.ReturnValuesOnConditionCheckFailureAllOld {
		got, gerr := c.raw.GetItem(ctx, &dynamodb.GetItemInput{TableName: in.TableName, Key: in.Key, ConsistentRead: aws.Bool(true)})
		if gerr != nil {
			return nil, gerr
		}
		ccf.Item = got.Item
	}
	return out, err
}

func TestDuplicateWithAllOldItemIsOneCall(t *testing.T) {
	r := newRig(t)
	s, err := dynamostore.New(allOldClient{Client: r.client, raw: testClient(t), byRef: !r.classic}, dynamostore.Options{Table: r.table})
	if err != nil {
		t.Fatal(err)
	}
	g := dedupe.New(s, &dedupe.Config{Prefix: "allold", Now: (&clock{now: base}).Now})
	ctx := context.Background()
	want := dedupe.Result{StatusCode: 201, Body: []byte("created")}
	if _, err := g.Do(ctx, dedupe.Call{Key: "k", Fingerprint: "fp"}, func(context.Context) (dedupe.Result, error) { return want, nil }); err != nil {
		t.Fatal(err)
	}
	r.calls.reset()
	out, err := g.Do(ctx, dedupe.Call{Key: "k", Fingerprint: "fp"}, func(context.Context) (dedupe.Result, error) {
		t.Error("duplicate ran the function")
		return dedupe.Result{}, nil
	})
	if err != nil || !out.Replayed || !bytes.Equal(out.Result.Body, want.Body) {
		t.Fatalf("replay = %+v, %v; want the stored result", out, err)
	}
	if ops, _ := r.calls.snapshot(); !slices.Equal(ops, []string{"UpdateItem"}) {
		t.Errorf("calls = %v, want [UpdateItem]", ops)
	}
}

// TestClaimRecordVanished forces the race in which the record that failed
// the claim's condition is gone before the fallback read.
func TestClaimRecordVanished(t *testing.T) {
	r := newRig(t)
	fc := faultClient{Client: r.client, fail: func(op string) error {
		if op == "UpdateItem" {
			return &types.ConditionalCheckFailedException{Message: aws.String("injected")}
		}
		return nil
	}}
	s, err := dynamostore.New(fc, dynamostore.Options{Table: r.table})
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Claim(context.Background(), dedupe.ClaimRequest{
		Key: "vanished-" + rand.Text(), Fingerprint: "fp", Token: "t", Now: base,
		LeaseUntil: base.Add(time.Minute), ExpiresAt: base.Add(time.Hour),
	})
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	if res.Acquired || res.Record.Key != "" {
		t.Errorf("got %+v, want not acquired with a zero record", res)
	}
}

func TestResultEncoding(t *testing.T) {
	r := newRig(t)
	random := make([]byte, 10<<10)
	_, _ = rand.Read(random)
	compressible := bytes.Repeat([]byte(`{"id":"pay_123","amount":4200,"currency":"EUR"},`), 5000)
	// The default threshold, 4 KiB, is written out rather than taken from
	// DefaultCompressAbove, so that a change to the default fails here.
	tests := []struct {
		name         string
		opts         dynamostore.Options
		result       dedupe.Result
		wantEncoding string // "" means no res_body attribute
	}{
		{"empty body", dynamostore.Options{}, dedupe.Result{StatusCode: 204}, ""},
		{"binary body", dynamostore.Options{}, dedupe.Result{StatusCode: 200, Body: []byte{0, 1, 0xff, '\n'}}, dynamostore.EncodingIdentity},
		// In a body item, a body not above the threshold is compressed
		// when that saves a write unit; inline, it never is.
		{"at threshold, in a body item", dynamostore.Options{}, dedupe.Result{Body: bytes.Repeat([]byte("a"), 4096)}, dynamostore.EncodingGzip},
		{"at threshold, inline", dynamostore.Options{CompressAbove: 200}, dedupe.Result{Body: bytes.Repeat([]byte("a"), 200)}, dynamostore.EncodingIdentity},
		{"in a body item, incompressible", dynamostore.Options{}, dedupe.Result{Body: random[:3000]}, dynamostore.EncodingIdentity},
		{"one byte over threshold", dynamostore.Options{}, dedupe.Result{Body: bytes.Repeat([]byte("a"), 4097)}, dynamostore.EncodingGzip},
		{"large compressible", dynamostore.Options{}, dedupe.Result{
			StatusCode: 200,
			Headers:    map[string][]string{"Content-Type": {"application/json"}, "X-Multi": {"1", "2"}},
			Body:       compressible,
		}, dynamostore.EncodingGzip},
		{"large incompressible", dynamostore.Options{}, dedupe.Result{StatusCode: 200, Body: random}, dynamostore.EncodingIdentity},
		{"configured threshold", dynamostore.Options{CompressAbove: 100}, dedupe.Result{Body: bytes.Repeat([]byte("a"), 101)}, dynamostore.EncodingGzip},
		{"negative threshold never compresses", dynamostore.Options{CompressAbove: -1}, dedupe.Result{Body: compressible}, dynamostore.EncodingIdentity},
	}
	ctx := context.Background()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := r.store(t, tt.opts)
			key := "enc-" + rand.Text()
			if _, err := s.Claim(ctx, dedupe.ClaimRequest{Key: key, Fingerprint: "fp", Token: "t", Now: base,
				LeaseUntil: base.Add(time.Minute), ExpiresAt: base.Add(time.Hour)}); err != nil {
				t.Fatal(err)
			}
			if err := s.Complete(ctx, dedupe.CompleteRequest{Key: key, Token: "t", Result: tt.result,
				Now: base, ExpiresAt: base.Add(time.Hour)}); err != nil {
				t.Fatalf("Complete: %v", err)
			}
			item := r.rawItem(t, key)
			if _, ok := item["inflight_shard"]; ok {
				t.Errorf("inflight_shard still set after Complete")
			}
			body, hasBody := item["res_body"].(*types.AttributeValueMemberB)
			enc, _ := item["res_encoding"].(*types.AttributeValueMemberS)
			if _, split := item["res_item"]; split {
				body, hasBody = r.rawItem(t, dynamostore.BodyItemKey(key, "t"))["res_body"].(*types.AttributeValueMemberB)
				if v, ok := strings.CutPrefix(enc.Value, "item:"); ok {
					enc = &types.AttributeValueMemberS{Value: v}
				} else {
					t.Errorf("res_encoding %q of a body item lacks item:", enc.Value)
				}
			}
			switch {
			case tt.wantEncoding == "" && hasBody:
				t.Errorf("res_body stored for an empty body")
			case tt.wantEncoding != "" && (!hasBody || enc == nil || enc.Value != tt.wantEncoding):
				t.Errorf("res_encoding = %v, want %q", item["res_encoding"], tt.wantEncoding)
			case tt.wantEncoding == dynamostore.EncodingGzip && len(body.Value) >= len(tt.result.Body):
				t.Errorf("stored %d bytes for a %d-byte body, want fewer", len(body.Value), len(tt.result.Body))
			}
			got, err := s.Get(ctx, key, base)
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			if got.Result == nil || got.Result.StatusCode != tt.result.StatusCode || !bytes.Equal(got.Result.Body, tt.result.Body) {
				t.Fatalf("got %+v, want the stored result byte for byte", got.Result)
			}
			if len(tt.result.Headers) > 0 && !equalHeaders(got.Result.Headers, tt.result.Headers) {
				t.Errorf("headers = %v, want %v", got.Result.Headers, tt.result.Headers)
			}
		})
	}
}

func equalHeaders(a, b map[string][]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			return false
		}
	}
	return true
}

// TestResultTooLarge stores an incompressible 500 KB body: the record is
// completed without it, and a duplicate is refused, never run again. The
// second case lets the estimate pass so that DynamoDB's own refusal takes
// the same path.
func TestResultTooLarge(t *testing.T) {
	r := newRig(t)
	big := make([]byte, 500<<10)
	_, _ = rand.Read(big)
	tests := []struct {
		name string
		opts dynamostore.Options
	}{
		{"estimated", dynamostore.Options{}},
		{"refused by server", dynamostore.Options{MaxItemBytes: 1 << 30}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := r.store(t, tt.opts)
			clk := &clock{now: base}
			g := dedupe.New(s, &dedupe.Config{Prefix: "big", Now: clk.Now})
			ctx := context.Background()
			key := "big-" + rand.Text()
			runs := 0
			fn := func(context.Context) (dedupe.Result, error) {
				runs++
				return dedupe.Result{StatusCode: 200, Body: big}, nil
			}
			out, err := g.Do(ctx, dedupe.Call{Key: key, Fingerprint: "fp"}, fn)
			if !errors.Is(err, dedupe.ErrResultTooLarge) {
				t.Fatalf("first Run error = %v, want ErrResultTooLarge", err)
			}
			if !bytes.Equal(out.Result.Body, big) {
				t.Errorf("first Run lost the real result")
			}
			rec, err := s.Get(ctx, g.Key(key), clk.Now())
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			if rec.Status != dedupe.StatusCompleted || !rec.ResultOmitted || rec.Result != nil {
				t.Errorf("record = %+v, want COMPLETED, ResultOmitted, no result", rec)
			}
			clk.Advance(time.Second)
			if _, err := g.Do(ctx, dedupe.Call{Key: key, Fingerprint: "fp"}, fn); !errors.Is(err, dedupe.ErrResultOmitted) {
				t.Errorf("duplicate error = %v, want ErrResultOmitted", err)
			}
			if runs != 1 {
				t.Errorf("function ran %d times, want 1", runs)
			}
		})
	}
}

// TestStoreUnavailable checks that transient failures wrap
// dedupe.ErrStoreUnavailable and others do not.
func TestStoreUnavailable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()
	down := testClient(t, func(o *dynamodb.Options) {
		o.BaseEndpoint = aws.String(closed)
		o.Retryer = retry.AddWithMaxBackoffDelay(retry.AddWithMaxAttempts(retry.NewStandard(), 2), time.Millisecond)
	})
	r := newRig(t)

	inject := func(err error) dynamostore.Client {
		return faultClient{Client: r.client, fail: func(string) error { return err }}
	}
	expired, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	cancelled, cancel2 := context.WithCancel(context.Background())
	cancel2()

	tests := []struct {
		name            string
		client          dynamostore.Client
		ctx             context.Context
		wantUnavailable bool
	}{
		{"connection refused", down, context.Background(), true},
		{"deadline passed", r.client, expired, true},
		{"throttling", inject(&smithy.GenericAPIError{Code: "ThrottlingException", Message: "slow down"}), context.Background(), true},
		{"provisioned throughput", inject(&types.ProvisionedThroughputExceededException{Message: aws.String("x")}), context.Background(), true},
		{"request limit", inject(&types.RequestLimitExceeded{Message: aws.String("x")}), context.Background(), true},
		{"internal server error", inject(&types.InternalServerError{Message: aws.String("x")}), context.Background(), true},
		{"service unavailable", inject(&smithy.GenericAPIError{Code: "ServiceUnavailable"}), context.Background(), true},
		{"validation", inject(&smithy.GenericAPIError{Code: "ValidationException", Message: "bad"}), context.Background(), false},
		{"resource not found", inject(&types.ResourceNotFoundException{Message: aws.String("no table")}), context.Background(), false},
		{"caller cancelled", r.client, cancelled, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := dynamostore.New(tt.client, dynamostore.Options{Table: r.table, GlobalTables: dynamostore.GlobalTablesUnchecked, KeySchema: dynamostore.KeySchemaByRef})
			if err != nil {
				t.Fatal(err)
			}
			key := "down-" + rand.Text()
			ops := map[string]error{}
			_, ops["claim"] = s.Claim(tt.ctx, dedupe.ClaimRequest{Key: key, Token: "t", Now: base,
				LeaseUntil: base.Add(time.Minute), ExpiresAt: base.Add(time.Hour)})
			ops["complete"] = s.Complete(tt.ctx, dedupe.CompleteRequest{Key: key, Token: "t", Now: base, ExpiresAt: base.Add(time.Hour)})
			ops["release"] = s.Release(tt.ctx, key, "t")
			_, ops["get"] = s.Get(tt.ctx, key, base)
			for op, err := range ops {
				if err == nil {
					t.Errorf("%s: got nil error", op)
					continue
				}
				if got := errors.Is(err, dedupe.ErrStoreUnavailable); got != tt.wantUnavailable {
					t.Errorf("%s: got %v, want ErrStoreUnavailable %v", op, err, tt.wantUnavailable)
				}
				if !strings.HasPrefix(err.Error(), "dynamostore: "+op+" ") {
					t.Errorf("%s: error %q lacks context", op, err)
				}
			}
		})
	}

	t.Run("guard fails closed", func(t *testing.T) {
		s, err := dynamostore.New(inject(&types.ProvisionedThroughputExceededException{}), dynamostore.Options{Table: r.table})
		if err != nil {
			t.Fatal(err)
		}
		g := dedupe.New(s, &dedupe.Config{Prefix: "down", Now: (&clock{now: base}).Now})
		_, err = g.Do(context.Background(), dedupe.Call{Key: "k", Fingerprint: "fp"}, func(context.Context) (dedupe.Result, error) {
			t.Error("function ran without a claim")
			return dedupe.Result{}, nil
		})
		if !errors.Is(err, dedupe.ErrStoreUnavailable) {
			t.Errorf("got %v, want ErrStoreUnavailable", err)
		}
	})
}

// TestLateCompleteRefusedThroughGuard drives the takeover through the
// guard with a fake clock: the first invocation outlives its lease, a retry
// takes the key over and completes, and the first invocation's late
// Complete is refused, leaving the retry's result in place.
func TestLateCompleteRefusedThroughGuard(t *testing.T) {
	r := newRig(t)
	s := r.store(t, dynamostore.Options{})
	clk := &clock{now: base}
	g := dedupe.New(s, &dedupe.Config{Prefix: "late", Now: clk.Now, DefaultLease: 10 * time.Second})
	ctx := context.Background()

	var retryOut dedupe.Outcome
	var retryErr error
	first, err := g.Do(ctx, dedupe.Call{Key: "k", Fingerprint: "fp"}, func(ctx context.Context) (dedupe.Result, error) {
		clk.Advance(11 * time.Second) // the first invocation hangs past its lease
		retryOut, retryErr = g.Do(ctx, dedupe.Call{Key: "k", Fingerprint: "fp"}, func(context.Context) (dedupe.Result, error) {
			return dedupe.Result{StatusCode: 201, Body: []byte("retry")}, nil
		})
		clk.Advance(time.Second)
		return dedupe.Result{StatusCode: 201, Body: []byte("late")}, nil
	})
	if retryErr != nil || !retryOut.Stored {
		t.Fatalf("retry = %+v, %v; want it to take over and store", retryOut, retryErr)
	}
	if !errors.Is(err, dedupe.ErrNotStored) || !errors.Is(err, dedupe.ErrLeaseLost) {
		t.Errorf("late owner error = %v, want ErrNotStored and ErrLeaseLost", err)
	}
	if first.Stored {
		t.Errorf("late owner Stored = true, want false")
	}
	rec, err := s.Get(ctx, g.Key("k"), clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	if rec.Result == nil || string(rec.Result.Body) != "retry" {
		t.Errorf("stored result = %+v, want the retry's", rec.Result)
	}
}

// TestDefaultsMatchTemplate checks the store's defaults against the table
// template.yaml declares: keys, the in-flight index, its projection (what
// Reap reads), and the TTL attribute.
func TestDefaultsMatchTemplate(t *testing.T) {
	path, err := infra.FindTemplate()
	if err != nil {
		t.Fatal(err)
	}
	tpl, err := infra.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	tables, err := infra.Tables(tpl)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(tables, func(tb infra.Table) bool { return tb.LogicalID == "IdempotencyTable" })
	if i < 0 {
		t.Fatal("no IdempotencyTable in the template")
	}
	in, a := tables[i].Input, dynamostore.DefaultAttributes()
	if len(in.KeySchema) != 2 || aws.ToString(in.KeySchema[0].AttributeName) != a.Ref || in.KeySchema[0].KeyType != types.KeyTypeHash ||
		aws.ToString(in.KeySchema[1].AttributeName) != a.PartitionKey || in.KeySchema[1].KeyType != types.KeyTypeRange {
		t.Errorf("key schema = %v, want partition key %q and sort key %q (keyed by reference)", in.KeySchema, a.Ref, a.PartitionKey)
	}
	if tables[i].TTLAttribute != a.ExpiresAt {
		t.Errorf("TTL attribute = %q, want %q", tables[i].TTLAttribute, a.ExpiresAt)
	}
	gi := slices.IndexFunc(in.GlobalSecondaryIndexes, func(g types.GlobalSecondaryIndex) bool {
		return aws.ToString(g.IndexName) == dynamostore.DefaultIndex
	})
	if gi < 0 {
		t.Fatalf("no index %q", dynamostore.DefaultIndex)
	}
	gsi := in.GlobalSecondaryIndexes[gi]
	var keys []string
	for _, k := range gsi.KeySchema {
		keys = append(keys, aws.ToString(k.AttributeName)+"/"+string(k.KeyType))
	}
	if want := []string{a.InflightShard + "/HASH", a.LeaseExpiresAt + "/RANGE"}; !slices.Equal(keys, want) {
		t.Errorf("index keys = %v, want %v", keys, want)
	}
	projected := slices.Sorted(slices.Values(gsi.Projection.NonKeyAttributes))
	if want := slices.Sorted(slices.Values([]string{a.Owner, a.Status, a.CreatedAt, a.LongKey})); !slices.Equal(projected, want) {
		t.Errorf("index projects %v, want %v (what Reap reads)", projected, want)
	}
	if got := infra.FunctionEnv(tpl, "ReaperFunction")["REAPER_SHARDS"]; got != strconv.Itoa(dynamostore.DefaultShards) {
		t.Errorf("REAPER_SHARDS = %q, want %d, the store's default", got, dynamostore.DefaultShards)
	}
}
