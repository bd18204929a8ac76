package dedupe_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/memstore"
)

// TestBase64BodyStoredDecodedReplayedAsSent states the invariant of a
// base64 response body (apigw.go's "a base64 body is stored decoded and
// re-encoded as it was sent"): the replay is the body exactly as the
// handler sent it, flag included; the record holds the decoded bytes
// when re-encoding gives the same text back, and the text as sent when
// it would not (no padding, a line break, not base64 at all), since
// re-encoding those would change the replay.
func TestBase64BodyStoredDecodedReplayedAsSent(t *testing.T) {
	var ev events.APIGatewayV2HTTPRequest
	fixture(t, "apigw-v2-jwt.json", &ev)
	for _, tt := range []struct {
		name, body string
		stored     string
	}{
		{"canonical", "aGk=", "hi"},
		{"canonical, no padding needed", "YWJj", "abc"},
		{"line break", "YWJj\nZGVm", "YWJj\nZGVm"},
		{"carriage return", "YWJj\r\n", "YWJj\r\n"},
		{"no padding", "aGk", "aGk"},
		{"not base64", "no base64!", "no base64!"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			store := memstore.New()
			var key string
			h := dedupe.HTTPAPI(dedupe.New(store, nil), nil, func(ctx context.Context, _ events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
				c, _ := dedupe.ClaimFrom(ctx)
				key = c.Key
				return events.APIGatewayV2HTTPResponse{StatusCode: 200, Body: tt.body, IsBase64Encoded: true}, nil
			})
			if _, err := h(context.Background(), ev); err != nil {
				t.Fatalf("first request: %v", err)
			}
			replay, err := h(context.Background(), ev)
			if err != nil || replay.Headers[dedupe.HeaderReplayed] != "true" {
				t.Fatalf("replay = %+v, %v; want a replay", replay, err)
			}
			if replay.Body != tt.body || !replay.IsBase64Encoded {
				t.Errorf("replay body %q base64 %v, want %q base64 true", replay.Body, replay.IsBase64Encoded, tt.body)
			}
			rec, err := store.Get(context.Background(), key, time.Now())
			if err != nil || rec.Result == nil {
				t.Fatalf("record: %+v, %v", rec, err)
			}
			if !bytes.Equal(rec.Result.Body, []byte(tt.stored)) {
				t.Errorf("stored body %q, want %q", rec.Result.Body, tt.stored)
			}
		})
	}
}
