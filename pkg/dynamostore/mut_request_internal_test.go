package dynamostore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/lambda-dedupe/dedupe/internal/dynamoitem"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
)

// memTable is itemClient with PutItem too (conditions ignored, as
// itemClient's), so that Complete's body items land beside the records:
// it runs Complete's real writes without a network.
type memTable struct{ *itemClient }

func (m memTable) PutItem(_ context.Context, in *dynamodb.PutItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	m.items[in.Item[m.pk].(*types.AttributeValueMemberS).Value] = maps.Clone(in.Item)
	return &dynamodb.PutItemOutput{}, nil
}

// memStore returns a store on a fresh memTable, with opts (Table, the
// global-table check and, unless set, the key schema filled in).
func memStore(t *testing.T, opts Options) (*Store, memTable) {
	t.Helper()
	m := memTable{&itemClient{pk: DefaultAttributes().PartitionKey, items: map[string]map[string]types.AttributeValue{}}}
	opts.Table, opts.GlobalTables = "mem", GlobalTablesUnchecked
	if opts.KeySchema == KeySchemaDetect {
		opts.KeySchema = KeySchemaByRef
	}
	s, err := New(m, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s, m
}

// claimed puts the IN_PROGRESS item a claim of req writes (the claim's
// own PutItem item, first_token req.Token) and returns the partition key
// value the table files it under.
func (m memTable) claimed(s *Store, req dedupe.ClaimRequest) string {
	item := s.claimItem(req)
	item[s.attr.FirstToken] = str(req.Token)
	pk := item[m.pk].(*types.AttributeValueMemberS).Value
	m.items[pk] = item
	return pk
}

var memNow = time.Date(2031, 1, 2, 3, 4, 5, 0, time.UTC)

// memClaim is a claim of key by token at memNow, with the provenance.
func memClaim(key, token, requestID, trace string) dedupe.ClaimRequest {
	return dedupe.ClaimRequest{Key: key, Fingerprint: "fp-" + strings.Repeat("f", 40), Token: token, Now: memNow,
		LeaseUntil: memNow.Add(time.Minute), ExpiresAt: memNow.Add(time.Hour), RequestID: requestID, Trace: trace}
}

// completion is the completion of the claim c with result r.
func completion(c dedupe.ClaimRequest, r dedupe.Result) dedupe.CompleteRequest {
	return dedupe.CompleteRequest{Key: c.Key, Token: c.Token, Result: r, Now: c.Now, ExpiresAt: c.Now.Add(24 * time.Hour),
		RequestID: c.RequestID, Trace: c.Trace}
}

// accounted is the size completedSize promises for a completed item:
// DynamoDB's accounting (ItemSize), with every number counted at its
// largest (dynamoitem.MaxNumberSize), the status as long as IN_PROGRESS,
// and without the fingerprint, which Complete does not see.
func accounted(item map[string]types.AttributeValue, a Attributes) int {
	var size func(v types.AttributeValue) int
	size = func(v types.AttributeValue) int {
		switch v := v.(type) {
		case *types.AttributeValueMemberN:
			return dynamoitem.MaxNumberSize
		case *types.AttributeValueMemberM:
			n := 3
			for k, e := range v.Value {
				n += len(k) + size(e) + 1
			}
			return n
		}
		return valueSize(v)
	}
	n := 0
	for name, v := range item {
		switch name {
		case a.Fingerprint:
		case a.Status:
			n += len(name) + len(dedupe.StatusInProgress)
		default:
			n += len(name) + size(v)
		}
	}
	return n
}

// TestCompletedSizeIsTheItemsSize: the size by which Complete decides
// (whether a result fits Options.MaxItemBytes, whether its body goes to a
// body item) is DynamoDB's accounting of the item Complete then leaves,
// with numbers at their largest, the status as long as IN_PROGRESS and
// without the fingerprint: no form of a result (headers or none, a body
// inline or gzipped or in S3, provenance, a fixed sort key, a key
// shortened in its sort key) is counted smaller, nor larger, than it is.
func TestCompletedSizeIsTheItemsSize(t *testing.T) {
	long := "long/" + strings.Repeat("é", 700)
	tests := []struct {
		name   string
		opts   Options
		key    string
		rid    string
		trace  string
		result dedupe.Result
		object bool // the body goes to S3 (LargeResults)
	}{
		{name: "status only", key: "k", result: dedupe.Result{StatusCode: 204}},
		{name: "headers and body", key: "k", rid: "req-1", trace: "Root=1-abc", result: dedupe.Result{StatusCode: 201,
			Headers: map[string][]string{"Content-Type": {"application/json"}, "Set-Cookie": {"a=1", "b=2"}}, Body: []byte(`{"id":"pay_1"}`)}},
		{name: "gzipped body", key: "k", result: dedupe.Result{StatusCode: 200, Body: bytes.Repeat([]byte("compressible "), 300)},
			opts: Options{CompressAbove: 100}},
		{name: "long key", key: long, result: dedupe.Result{StatusCode: 200, Body: []byte("ok")}},
		{name: "classic with a sort key", key: "k", rid: "req-2", result: dedupe.Result{StatusCode: 200, Body: []byte("ok")},
			opts: Options{KeySchema: KeySchemaClassic, SortKey: SortKey{Name: "sk", Value: "IDEMPOTENCY"}}},
		{name: "body in S3", key: "k", result: dedupe.Result{StatusCode: 200, Body: []byte("a body kept in S3")}, object: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, m := memStore(t, tt.opts)
			c := memClaim(tt.key, "tok-"+tt.name, tt.rid, tt.trace)
			pk := m.claimed(s, c)
			req := completion(c, tt.result)
			res := s.encodeResult(req.Result)
			if tt.object {
				sum := make([]byte, sha256.Size)
				res.object = &objectRef{bucket: "results", name: ObjectName(DefaultObjectPrefix, req.Key, req.Token), size: int64(len(res.body)), sha256: sum}
				res.body = nil
			}
			est := s.completedSize(req, res)
			if err := s.update(context.Background(), req, res); err != nil {
				t.Fatal(err)
			}
			if got := accounted(m.items[pk], s.attr); est != got {
				t.Errorf("completedSize = %d, but the item Complete wrote counts %d (%d by ItemSize)", est, got, ItemSize(m.items[pk]))
			}
		})
	}
}

// TestCompleteBounds: Options.MaxItemBytes is the largest estimated item
// that keeps its result (one byte more is stored without it), and a record
// that fits one write unit (WriteUnitBytes) keeps its body inline: only a
// body that would push the record past it goes to a body item.
func TestCompleteBounds(t *testing.T) {
	ctx := context.Background()
	t.Run("MaxItemBytes", func(t *testing.T) {
		s0, _ := memStore(t, Options{})
		c := memClaim("k", "tok", "", "")
		req := completion(c, dedupe.Result{StatusCode: 200, Body: []byte("a body")})
		limit := s0.completedSize(req, s0.encodeResult(req.Result))
		for _, max := range []int{limit, limit - 1} {
			s, m := memStore(t, Options{MaxItemBytes: max})
			m.claimed(s, c)
			err := s.Complete(ctx, req)
			rec, gerr := s.Get(ctx, c.Key, c.Now)
			if gerr != nil {
				t.Fatal(gerr)
			}
			kept := rec.Result != nil && string(rec.Result.Body) == "a body"
			if fits := max >= limit; kept != fits || errors.Is(err, dedupe.ErrResultTooLarge) == fits {
				t.Errorf("MaxItemBytes %d, item of %d: result kept %v, Complete = %v; want kept %v", max, limit, kept, err, fits)
			}
		}
	})
	t.Run("WriteUnitBytes", func(t *testing.T) {
		s, m := memStore(t, Options{})
		size := func(req dedupe.CompleteRequest) int { return s.completedSize(req, s.encodeResult(req.Result)) }
		c := memClaim("k", "tok", "", "")
		one := size(completion(c, dedupe.Result{StatusCode: 200, Body: []byte("x")}))
		for _, n := range []int{1 + WriteUnitBytes - one, 2 + WriteUnitBytes - one} {
			req := completion(c, dedupe.Result{StatusCode: 200, Body: bytes.Repeat([]byte("x"), n)})
			if got := size(req); got != WriteUnitBytes && got != WriteUnitBytes+1 {
				t.Fatalf("built a record of %d bytes, want %d or one more", got, WriteUnitBytes)
			}
			pk := m.claimed(s, c)
			if err := s.Complete(ctx, req); err != nil {
				t.Fatal(err)
			}
			_, split := m.items[pk][s.attr.ResItem]
			_, inline := m.items[pk][s.attr.ResBody]
			if over := size(req) > WriteUnitBytes; split != over || inline == over {
				t.Errorf("record of %d bytes: body item %v, inline body %v; want a body item only past %d bytes", size(req), split, inline, WriteUnitBytes)
			}
			if rec, err := s.Get(ctx, c.Key, c.Now); err != nil || rec.Result == nil || len(rec.Result.Body) != n {
				t.Errorf("record of %d bytes: Get = %+v, %v; want its body", size(req), rec.Result, err)
			}
		}
	})
}

// TestBodyItemSizeIsTheItemsSize: the size by which a body item's
// compression is decided is DynamoDB's accounting of the body item
// written, with its expiry counted at the largest number, on either key
// schema and with a fixed sort key.
func TestBodyItemSizeIsTheItemsSize(t *testing.T) {
	for _, opts := range []Options{
		{KeySchema: KeySchemaByRef},
		{KeySchema: KeySchemaClassic},
		{KeySchema: KeySchemaClassic, SortKey: SortKey{Name: "sk", Value: "IDEMPOTENCY"}},
	} {
		t.Run(opts.KeySchema.String()+"/"+opts.SortKey.Name, func(t *testing.T) {
			s, m := memStore(t, opts)
			c := memClaim("k", "tok-body", "", "")
			req := completion(c, dedupe.Result{StatusCode: 200})
			body := bytes.Repeat([]byte("b"), 3000)
			if err := s.putBody(context.Background(), req, body); err != nil {
				t.Fatal(err)
			}
			item := m.items[s.bodyKey(req.Key, req.Token)[m.pk].(*types.AttributeValueMemberS).Value]
			if got, want := s.bodyItemSize(req, len(body)), accounted(item, s.attr); got != want {
				t.Errorf("bodyItemSize = %d, but the body item written counts %d (%d by ItemSize)", got, want, ItemSize(item))
			}
		})
	}
}

// TestBodyItemCompression: a body below CompressAbove that goes to a body
// item is stored gzip-compressed when, and only when, that takes fewer
// write units; a negative CompressAbove never compresses, in a body item
// neither. It replays byte for byte either way.
func TestBodyItemCompression(t *testing.T) {
	rng := rand.New(rand.NewChaCha8([32]byte{'h', '3', '7', 'a'}))
	noise := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	// Saves bytes, not a unit: 1,700 bytes, of which 200 zeros, gzip to
	// about 1,530, and with the record's overhead both take 2 units.
	little := append(noise(1500), make([]byte, 200)...)
	much := bytes.Repeat([]byte("compressible "), 250) // 3,250 bytes, to some 60
	tests := []struct {
		name          string
		compressAbove int
		body          []byte
		want          string
	}{
		{"saves units", 0, much, "item:" + EncodingGzip},
		{"saves no unit", 0, little, "item:" + EncodingIdentity},
		{"never compress", -1, much, "item:" + EncodingIdentity},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			s, m := memStore(t, Options{CompressAbove: tt.compressAbove})
			c := memClaim("k", "tok", "", "")
			pk := m.claimed(s, c)
			if err := s.Complete(ctx, completion(c, dedupe.Result{StatusCode: 200, Body: tt.body})); err != nil {
				t.Fatal(err)
			}
			enc, _ := m.items[pk][s.attr.ResEncoding].(*types.AttributeValueMemberS)
			if enc == nil || enc.Value != tt.want {
				t.Errorf("encoding %v, want %q", m.items[pk][s.attr.ResEncoding], tt.want)
			}
			bodyItem := m.items[s.bodyKey(c.Key, c.Token)[m.pk].(*types.AttributeValueMemberS).Value]
			stored := bodyItem[s.attr.ResBody].(*types.AttributeValueMemberB).Value
			if tt.name == "saves no unit" {
				gz, _ := dynamoitem.Compress(tt.body, 0)
				plain := ItemSize(bodyItem)
				if len(gz) >= len(tt.body) || WriteUnits(plain-len(tt.body)+len(gz)) != WriteUnits(plain) {
					t.Fatalf("premise: gzip gives %d of %d bytes, %d units against %d", len(gz), len(tt.body), WriteUnits(plain-len(tt.body)+len(gz)), WriteUnits(plain))
				}
			}
			if rec, err := s.Get(ctx, c.Key, c.Now); err != nil || rec.Result == nil || !bytes.Equal(rec.Result.Body, tt.body) {
				t.Errorf("Get = %v; want the body back (%d bytes stored)", err, len(stored))
			}
		})
	}
}

// TestNoBodyNoBodyItem: a result without a body writes no body item,
// however large its headers make the record, and a result without headers
// stores no Attributes.ResHeaders (absent when there are none); each
// replays as it was.
func TestNoBodyNoBodyItem(t *testing.T) {
	ctx := context.Background()
	for _, r := range []dedupe.Result{
		{StatusCode: 204, Headers: map[string][]string{"X-Large": {strings.Repeat("h", 2*WriteUnitBytes)}}},
		{StatusCode: 200, Body: []byte("no headers")},
	} {
		s, m := memStore(t, Options{})
		c := memClaim("k", "tok", "", "")
		pk := m.claimed(s, c)
		if err := s.Complete(ctx, completion(c, r)); err != nil {
			t.Fatal(err)
		}
		if len(m.items) != 1 {
			t.Errorf("%d headers, %d-byte body: %d items written, want the record alone", len(r.Headers), len(r.Body), len(m.items))
		}
		if _, ok := m.items[pk][s.attr.ResHeaders]; ok != (len(r.Headers) > 0) {
			t.Errorf("%d headers: res_headers stored %v", len(r.Headers), ok)
		}
		rec, err := s.Get(ctx, c.Key, c.Now)
		if err != nil || rec.Result == nil || !bytes.Equal(rec.Result.Body, r.Body) || len(rec.Result.Headers) != len(r.Headers) {
			t.Errorf("Get = %+v, %v; want %+v", rec.Result, err, r)
		}
	}
}

// TestHeadersCodec: decodeHeaders reverses encodeHeaders for every header
// map (none, names without values, empty values last, names and values of
// any length), and refuses every truncated or extended encoding rather
// than read it as other headers.
func TestHeadersCodec(t *testing.T) {
	for _, h := range []map[string][]string{
		{},
		{"A": {"1"}},
		{"X-Empty": {""}},
		{strings.Repeat("N", 300): nil},
		{"A": {strings.Repeat("v", 300)}},
		{"A": {"", "", "", "", ""}},
		{"Set-Cookie": {"a=1", "b=2"}, "X-Nil": nil, "X-Latin1": {"caf\xe9"}},
	} {
		enc := encodeHeaders(h)
		got, err := decodeHeaders(enc)
		if err != nil || !sameHeaders(got, h) {
			t.Errorf("decodeHeaders(encodeHeaders(%q)) = %q, %v", h, got, err)
		}
		for n := range len(enc) {
			if got, err := decodeHeaders(enc[:n]); err == nil {
				t.Errorf("%q: the first %d of %d bytes decode as %q, want an error", h, n, len(enc), got)
			}
		}
		if got, err := decodeHeaders(append(enc, 0)); err == nil {
			t.Errorf("%q with a byte more decodes as %q, want an error", h, got)
		}
	}
}

// TestShortenedSortKey: a key longer than MaxPlainSortKey is kept in the
// sort key of a table keyed by reference in the form every version must
// compute alike (KeySchema): its longest prefix of at most 956 bytes that
// ends at a UTF-8 boundary, "#sha256:" and the hex SHA-256 of the whole
// key; valid UTF-8 and at most 1024 bytes, wherever the boundary falls.
func TestShortenedSortKey(t *testing.T) {
	const prefix = 1024 - len("#sha256:") - 64
	for _, lead := range []int{0, 1, 2, 3} {
		for _, r := range []string{"é", "€", "😀", "x"} {
			key := strings.Repeat("a", lead) + strings.Repeat(r, 1100/len(r))
			want := prefix
			for !utf8.RuneStart(key[want]) {
				want--
			}
			sum := sha256.Sum256([]byte(key))
			got := sortKeyValue(key)
			if got != key[:want]+"#sha256:"+hex.EncodeToString(sum[:]) || !utf8.ValidString(got) || len(got) > 1024 || len(got) <= MaxPlainSortKey {
				t.Errorf("%d bytes of a, then %q: sort key of %d bytes keeps %d bytes of the key, want %d", lead, r, len(got), strings.Index(got, "#sha256:"), want)
			}
		}
	}
}

// TestUnavailableIsTransientOnly: a failure wraps
// dedupe.ErrStoreUnavailable (which the guard may retry, or fail open on)
// exactly when trying again later may succeed: throttling, a server-side
// fault, a network failure, a deadline; never the caller's cancellation,
// a request DynamoDB refuses, or a failed condition. The error itself
// stays in the chain either way.
func TestUnavailableIsTransientOnly(t *testing.T) {
	api := func(code string) error { return &smithy.GenericAPIError{Code: code, Message: "m"} }
	tests := []struct {
		name      string
		err       error
		transient bool
	}{
		{"throttled", api("ThrottlingException"), true},
		{"over provisioned throughput", api("ProvisionedThroughputExceededException"), true},
		{"server fault", api("InternalServerError"), true},
		{"another Region writing", api("ReplicatedWriteConflictException"), true},
		{"deadline", context.DeadlineExceeded, true},
		{"deadline, wrapped", fmt.Errorf("operation: %w", context.DeadlineExceeded), true},
		{"send failed", &smithyhttp.RequestSendError{Err: errors.New("dial")}, true},
		{"connection reset", &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}, true},
		{"caller cancelled", context.Canceled, false},
		{"caller cancelled, wrapped", fmt.Errorf("operation: %w", context.Canceled), false},
		{"validation", api("ValidationException"), false},
		{"access denied", api("AccessDeniedException"), false},
		{"failed condition", &types.ConditionalCheckFailedException{Message: aws.String("m")}, false},
		{"anything else", errors.New("boom"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := wrapErr("claim", "k", tt.err)
			if got := errors.Is(err, dedupe.ErrStoreUnavailable); got != tt.transient {
				t.Errorf("%v: unavailable %v, want %v", err, got, tt.transient)
			}
			if !errors.Is(err, tt.err) {
				t.Errorf("%v does not wrap %v", err, tt.err)
			}
		})
	}
}

// TestItemTooLarge: only DynamoDB's refusal of an item over its size limit
// (a ValidationException saying so) sends Complete to store the record
// without its result (or in S3); any other refusal is Complete's error.
func TestItemTooLarge(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"too large", &smithy.GenericAPIError{Code: "ValidationException", Message: "Item size has exceeded the maximum allowed size"}, true},
		{"too large, wrapped", fmt.Errorf("op: %w", &smithy.GenericAPIError{Code: "ValidationException", Message: "Item size to update has exceeded the maximum allowed size"}), true},
		{"another validation", &smithy.GenericAPIError{Code: "ValidationException", Message: "One or more parameter values were invalid"}, false},
		{"another code", &smithy.GenericAPIError{Code: "InternalServerError", Message: "exceeded the maximum allowed size"}, false},
		{"not an API error", errors.New("exceeded the maximum allowed size"), false},
		{"none", nil, false},
	}
	for _, tt := range tests {
		if got := isItemTooLarge(tt.err); got != tt.want {
			t.Errorf("%s: got %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestMalformedRecordsAreRefused: a record the store cannot read as it
// was written (an encoding it does not know, such as a later version's, a
// body item's encoding without its marker, an attribute of the wrong type
// or missing, a body that does not decompress) is refused with
// ErrMalformedItem, never answered with an empty or partial result, and
// never reported as unavailable.
func TestMalformedRecordsAreRefused(t *testing.T) {
	ctx := context.Background()
	a := DefaultAttributes()
	b := func(v []byte) types.AttributeValue { return &types.AttributeValueMemberB{Value: v} }
	tests := []struct {
		name    string
		body    []byte // the completed result's body (2,000 bytes go to a body item)
		corrupt func(item map[string]types.AttributeValue)
	}{
		{"unknown encoding", []byte("ok"), func(i map[string]types.AttributeValue) { i[a.ResEncoding] = str("zstd") }},
		{"body item without its marker", make([]byte, 2000), func(i map[string]types.AttributeValue) { i[a.ResEncoding] = str(EncodingIdentity) }},
		{"body item not a map", make([]byte, 2000), func(i map[string]types.AttributeValue) { i[a.ResItem] = str("x") }},
		{"body item without its digest", make([]byte, 2000), func(i map[string]types.AttributeValue) {
			i[a.ResItem] = &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{objSize: num(2000)}}
		}},
		{"owner missing", []byte("ok"), func(i map[string]types.AttributeValue) { delete(i, a.Owner) }},
		{"owner a number", []byte("ok"), func(i map[string]types.AttributeValue) { i[a.Owner] = num(1) }},
		{"status a string", []byte("ok"), func(i map[string]types.AttributeValue) { i[a.ResStatus] = str("200") }},
		{"status not a number", []byte("ok"), func(i map[string]types.AttributeValue) { i[a.ResStatus] = &types.AttributeValueMemberN{Value: "2x"} }},
		{"headers a Boolean", []byte("ok"), func(i map[string]types.AttributeValue) { i[a.ResHeaders] = &types.AttributeValueMemberBOOL{} }},
		{"headers truncated", []byte("ok"), func(i map[string]types.AttributeValue) { i[a.ResHeaders] = b([]byte{headersVersion, 1}) }},
		{"body a string", []byte("ok"), func(i map[string]types.AttributeValue) { i[a.ResBody] = str("ok") }},
		{"omitted a string", []byte("ok"), func(i map[string]types.AttributeValue) { i[a.ResOmitted] = str("false") }},
		{"gzip that is not", []byte("ok"), func(i map[string]types.AttributeValue) { i[a.ResEncoding] = str(EncodingGzip) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, m := memStore(t, Options{})
			c := memClaim("k", "tok", "", "")
			pk := m.claimed(s, c)
			if err := s.Complete(ctx, completion(c, dedupe.Result{StatusCode: 200, Headers: map[string][]string{"A": {"1"}}, Body: tt.body})); err != nil {
				t.Fatal(err)
			}
			if rec, err := s.Get(ctx, c.Key, c.Now); err != nil || rec.Result == nil {
				t.Fatalf("before: Get = %+v, %v", rec, err)
			}
			tt.corrupt(m.items[pk])
			rec, err := s.Get(ctx, c.Key, c.Now)
			if !errors.Is(err, ErrMalformedItem) || errors.Is(err, dedupe.ErrStoreUnavailable) || rec.Result != nil {
				t.Errorf("Get = result %+v, %v; want ErrMalformedItem and no result", rec.Result, err)
			}
		})
	}
}
