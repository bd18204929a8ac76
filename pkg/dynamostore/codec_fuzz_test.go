package dynamostore

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
)

// itemClient is a one-table stand-in for DynamoDB that applies
// UpdateItem's SET and REMOVE clauses (as Complete writes them, with
// expression attribute names and values) and answers GetItem. It ignores
// conditions: it exists to run the real codec, Complete's item and Get's
// decoding, end to end without a network, at fuzzing speed.
type itemClient struct {
	Client // nil: PutItem and Query are not called
	pk     string
	items  map[string]map[string]types.AttributeValue
}

func (c *itemClient) UpdateItem(_ context.Context, in *dynamodb.UpdateItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	key := in.Key[c.pk].(*types.AttributeValueMemberS).Value
	item := c.items[key]
	if item == nil {
		return nil, errors.New("itemClient: no item")
	}
	expr := *in.UpdateExpression
	set, remove, _ := strings.Cut(strings.TrimPrefix(expr, "SET "), " REMOVE ")
	for _, a := range strings.Split(set, ", ") {
		name, value, ok := strings.Cut(a, " = ")
		if !ok {
			return nil, errors.New("itemClient: bad SET clause " + a)
		}
		item[in.ExpressionAttributeNames[name]] = in.ExpressionAttributeValues[value]
	}
	for _, name := range strings.Split(remove, ", ") {
		delete(item, in.ExpressionAttributeNames[name])
	}
	return &dynamodb.UpdateItemOutput{}, nil
}

func (c *itemClient) GetItem(_ context.Context, in *dynamodb.GetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	key := in.Key[c.pk].(*types.AttributeValueMemberS).Value
	return &dynamodb.GetItemOutput{Item: maps.Clone(c.items[key])}, nil
}

// fuzzResultHeaders builds headers from "name\x00value\x00name\x00value..."
// with any bytes, repeated names appended in order.
func fuzzResultHeaders(b []byte) map[string][]string {
	if len(b) == 0 {
		return nil
	}
	h := map[string][]string{}
	parts := bytes.Split(b, []byte{0})
	for i := 0; i+1 < len(parts); i += 2 {
		h[string(parts[i])] = append(h[string(parts[i])], string(parts[i+1]))
	}
	if len(parts)%2 == 1 && len(parts[len(parts)-1]) > 0 {
		name := string(parts[len(parts)-1])
		if _, ok := h[name]; !ok {
			h[name] = []string{} // a name with no values
		}
	}
	return h
}

// sameHeaders compares headers treating nil and empty alike.
func sameHeaders(a, b map[string][]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, va := range a {
		vb, ok := b[k]
		if !ok || !slices.Equal(va, vb) {
			return false
		}
	}
	return true
}

// FuzzRecordCodec checks that what Complete writes, Get reads back
// identically: status, headers with any bytes in names and values
// (non-UTF-8 included, repeated values in order), and bodies of any bytes,
// stored as they are or gzip-compressed (compressAbove picks the
// threshold: the fuzzer reaches both). It also feeds the header bytes to
// decodeHeaders directly, which must refuse garbage without panicking.
func FuzzRecordCodec(f *testing.F) {
	f.Add(201, []byte("Content-Type\x00application/json\x00Set-Cookie\x00a=1\x00Set-Cookie\x00b=2"), []byte(`{"id":"pay_1"}`), int16(0))
	f.Add(200, []byte("Content-Disposition\x00attachment; filename=\"caf\xe9.txt\"\x00X-\xff\x00\xfe"), bytes.Repeat([]byte("compressible "), 400), int16(0))
	f.Add(200, []byte{}, []byte{0x1f, 0x8b, 0, 0xff}, int16(1))
	f.Add(204, []byte("X-Empty\x00\x00Lonely"), []byte{}, int16(-1))
	f.Add(599, []byte{1, 0, 0}, []byte("a"), int16(10))
	f.Fuzz(func(t *testing.T, status int, hdr, body []byte, compressAbove int16) {
		// Any bytes are garbage or a valid encoding; never a panic.
		if h, err := decodeHeaders(hdr); err == nil {
			if again, err := decodeHeaders(encodeHeaders(h)); err != nil || !sameHeaders(again, h) {
				t.Fatalf("decodeHeaders(%q) = %q, which re-encodes to %q (%v)", hdr, h, again, err)
			}
		}

		c := &itemClient{pk: DefaultAttributes().PartitionKey, items: map[string]map[string]types.AttributeValue{}}
		s, err := New(c, Options{Table: "fuzz", CompressAbove: int(compressAbove), GlobalTables: GlobalTablesUnchecked, KeySchema: KeySchemaByRef})
		if err != nil {
			t.Fatal(err)
		}
		a := s.attr
		now := time.Date(2031, 1, 2, 3, 4, 5, 0, time.UTC)
		const key, token = "fn#http:a/b|POST /x|-|k", "tok"
		c.items[key] = map[string]types.AttributeValue{
			a.PartitionKey:   str(key),
			a.Status:         str(string(dedupe.StatusInProgress)),
			a.Fingerprint:    str("fp"),
			a.Owner:          str(token),
			a.LeaseExpiresAt: num(now.Add(time.Minute).UnixMilli()),
			a.ExpiresAt:      num(now.Add(time.Hour).Unix()),
			a.CreatedAt:      num(now.UnixMilli()),
			a.UpdatedAt:      num(now.UnixMilli()),
			a.InflightShard:  num(1),
		}
		want := dedupe.Result{StatusCode: status, Headers: fuzzResultHeaders(hdr), Body: body}
		err = s.Complete(context.Background(), dedupe.CompleteRequest{Key: key, Token: token, Result: want, Now: now, ExpiresAt: now.Add(24 * time.Hour)})
		if errors.Is(err, dedupe.ErrResultTooLarge) {
			return // too big for an item: recorded without it, tested elsewhere
		}
		if err != nil {
			t.Fatalf("Complete: %v", err)
		}
		if enc := c.items[key][a.ResEncoding]; enc != nil && len(body) > 0 {
			gz := enc.(*types.AttributeValueMemberS).Value == EncodingGzip
			if gz && (compressAbove < 0 || len(body) <= int(compressAbove) && compressAbove > 0) {
				t.Fatalf("body of %d bytes gzipped with CompressAbove %d", len(body), compressAbove)
			}
		}
		rec, err := s.Get(context.Background(), key, now)
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		got := rec.Result
		if rec.Status != dedupe.StatusCompleted || rec.ResultOmitted || got == nil {
			t.Fatalf("Get = status %s omitted %v result %v, want a completed record with its result", rec.Status, rec.ResultOmitted, got)
		}
		if got.StatusCode != want.StatusCode || !bytes.Equal(got.Body, want.Body) || !sameHeaders(got.Headers, want.Headers) {
			t.Fatalf("read back %d %q %q, want %d %q %q", got.StatusCode, got.Headers, got.Body, want.StatusCode, want.Headers, want.Body)
		}
		if _, ok := c.items[key][a.InflightShard]; ok {
			t.Fatal("the completed record is still in the in-flight index")
		}
	})
}
