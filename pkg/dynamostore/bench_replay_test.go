package dynamostore_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/lambda-dedupe/dedupe/localtest/dynamotest"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/dynamostore"
)

// captured is a dynamostore.Client that passes every call on and keeps
// the last claim's UpdateItem and the last GetItem, their answers
// included.
type captured struct {
	dynamostore.Client
	update    *dynamodb.UpdateItemInput
	updateErr error
	get       *dynamodb.GetItemInput
	got       *dynamodb.GetItemOutput
}

func (c *captured) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	out, err := c.Client.UpdateItem(ctx, in, o...)
	c.update, c.updateErr = in, err
	return out, err
}

func (c *captured) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	out, err := c.Client.GetItem(ctx, in, o...)
	c.get, c.got = in, out
	return out, err
}

// answering is a dynamostore.Client without I/O: it answers the claim's
// UpdateItem and the GetItem with what a real replay got.
type answering struct {
	dynamostore.Client
	c *captured
}

func (a answering) UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return nil, a.c.updateErr
}

func (a answering) GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return a.c.got, nil
}

// BenchmarkReplayFloor measures a guarded replay (HTTP API adapter, no
// cache) on the test endpoint beside its floor, the same two calls sent
// by hand, in turns ("interleaved"), so that their difference is what
// the guard, the adapter and the store add to a replay. The floor sends
// the very inputs the guard's replay sent (captured from it): the
// claim's conditional UpdateItem, failing on the completed record, and,
// on a server that ignores ALL_OLD (dynalite), the strongly consistent
// GetItem that reads the record. "no-io" is the guarded replay on a
// client that answers those calls from memory: the CPU and allocations
// of everything but the SDK and the server.
func BenchmarkReplayFloor(b *testing.B) {
	client := testClient(b)
	table := dynamotest.IdempotencyTable(b, client)
	c := &captured{Client: client}
	replay := func(b *testing.B, cl dynamostore.Client) (func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error), events.APIGatewayV2HTTPRequest) {
		s, err := dynamostore.New(cl, dynamostore.Options{Table: table, GlobalTables: dynamostore.GlobalTablesUnchecked, KeySchema: dynamostore.KeySchemaByRef})
		if err != nil {
			b.Fatal(err)
		}
		h := dedupe.HTTPAPI(dedupe.New(s, &dedupe.Config{Prefix: "bench"}), nil, func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
			return events.APIGatewayV2HTTPResponse{StatusCode: 201, Headers: map[string]string{"Content-Type": "application/json"},
				Body: `{"id":"pay_1","amount":1250,"currency":"EUR","status":"succeeded"}`}, nil
		})
		req := events.APIGatewayV2HTTPRequest{
			RouteKey: "POST /payments", RawPath: "/payments",
			Headers: map[string]string{"idempotency-key": "replay-" + table, "content-type": "application/json"},
			Body:    `{"amount":1250,"currency":"EUR","source":"tok_visa"}`,
			RequestContext: events.APIGatewayV2HTTPRequestContext{
				APIID: "bench", Stage: "$default", RouteKey: "POST /payments",
				HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "POST"},
				Authorizer: &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
					JWT: &events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription{Claims: map[string]string{"iss": "https://issuer", "sub": "alice"}},
				},
			},
		}
		return h, req
	}
	check := func(b *testing.B, resp events.APIGatewayV2HTTPResponse) {
		if resp.StatusCode != 201 || resp.Headers[dedupe.HeaderReplayed] != "true" {
			b.Fatalf("not a replay: %+v", resp)
		}
	}
	ctx := context.Background()
	h, req := replay(b, c)
	h(ctx, req) // the fresh request
	resp, _ := h(ctx, req)
	check(b, resp)
	raw := func(b *testing.B) {
		if _, err := client.UpdateItem(ctx, c.update); err == nil {
			b.Fatal("the floor's claim was applied")
		}
		if c.get == nil {
			return // the failed claim returned the item
		}
		if _, err := client.GetItem(ctx, c.get); err != nil {
			b.Fatal(err)
		}
	}
	// The guarded replay and its floor in turns, each timed alone, so
	// that both see the same load: run one after the other, as two
	// benchmarks, their ratio moved with whatever the machine did in
	// between. ns/op is the pair's; guarded-ns and raw-ns are each one's
	// mean, and guarded/raw their ratio.
	b.Run("interleaved", func(b *testing.B) {
		b.ReportAllocs()
		var guarded, floor time.Duration
		for b.Loop() {
			t := time.Now()
			resp, _ := h(ctx, req)
			guarded += time.Since(t)
			check(b, resp)
			t = time.Now()
			raw(b)
			floor += time.Since(t)
		}
		b.ReportMetric(float64(guarded.Nanoseconds())/float64(b.N), "guarded-ns")
		b.ReportMetric(float64(floor.Nanoseconds())/float64(b.N), "raw-ns")
		if floor > 0 {
			b.ReportMetric(float64(guarded)/float64(floor), "guarded/raw")
		}
	})
	b.Run("no-io", func(b *testing.B) {
		h, req := replay(b, answering{c: c})
		b.ReportAllocs()
		for b.Loop() {
			resp, _ := h(ctx, req)
			check(b, resp)
		}
	})
}
