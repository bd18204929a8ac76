package dynamostore_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/dynamostore"
)

// TestInspect: an operator's store, built without LargeResults, reads a
// record whose response body is in S3 without reading S3: Get refuses
// it, Inspect and InspectRef name its object, its status and headers,
// even once the object is gone; a store given the object's bucket then
// reads the body, checked.
func TestInspect(t *testing.T) {
	endpoint := s3Endpoint(t)
	ctx := context.Background()
	objects, bucket := newS3(t, endpoint)
	r := newRig(t)
	writer := r.store(t, dynamostore.Options{LargeResults: dynamostore.LargeResults{Client: objects, Bucket: bucket}})
	operator := r.store(t, dynamostore.Options{})

	write := func(key string, body []byte) {
		t.Helper()
		if _, err := writer.Claim(ctx, dedupe.ClaimRequest{Key: key, Fingerprint: "fp", Token: "tok-" + key, Now: base,
			LeaseUntil: base.Add(time.Minute), ExpiresAt: base.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		if err := writer.Complete(ctx, dedupe.CompleteRequest{Key: key, Token: "tok-" + key, Now: base, ExpiresAt: base.Add(24 * time.Hour),
			Result: dedupe.Result{StatusCode: 201, Headers: map[string][]string{"Content-Type": {"application/json"}}, Body: body}}); err != nil {
			t.Fatal(err)
		}
	}
	large, small := "inspect/large/"+rand.Text(), "inspect/small/"+rand.Text()
	body := bigBody(600 << 10)
	write(large, body)
	write(small, []byte(`{"ok":true}`))

	if _, err := operator.Get(ctx, large, base); !errors.Is(err, dynamostore.ErrObjectInvalid) {
		t.Fatalf("Get without LargeResults = %v, want ErrObjectInvalid (the premise)", err)
	}
	got, err := operator.Inspect(ctx, large, base)
	if err != nil {
		t.Fatalf("Inspect: %v", err)
	}
	if got.Status != dedupe.StatusCompleted || got.Result == nil || got.Result.StatusCode != 201 || got.Result.Body != nil ||
		got.Result.Headers["Content-Type"][0] != "application/json" || got.Token != "tok-"+large {
		t.Errorf("Inspect = %+v; want the completed record, status and headers, no body", got.Record)
	}
	if o := got.Object; o == nil || o.Bucket != bucket || o.Name != dynamostore.ObjectName(dynamostore.DefaultObjectPrefix, large, "tok-"+large) ||
		o.Size != int64(len(body)) || (o.Encoding != "" && o.Encoding != dynamostore.EncodingIdentity) {
		t.Errorf("Inspect object = %+v; want bucket %s, its name, %d bytes, identity", o, bucket, len(body))
	}
	recs, err := operator.InspectRef(ctx, dedupe.KeyRef(large), base)
	if err != nil || len(recs) != 1 || recs[0].Key != large || recs[0].Object == nil {
		t.Errorf("InspectRef = %+v, %v; want the record and its object", recs, err)
	}
	if got, err := operator.Inspect(ctx, small, base); err != nil || got.Object != nil || string(got.Result.Body) != `{"ok":true}` {
		t.Errorf("Inspect of a body in the item = %+v, %v; want the body, no object", got, err)
	}
	// The body, from a store that names the object's bucket.
	reader := r.store(t, dynamostore.Options{LargeResults: dynamostore.LargeResults{Client: objects, Bucket: got.Object.Bucket}})
	if full, err := reader.Get(ctx, large, base); err != nil || !bytes.Equal(full.Result.Body, body) {
		t.Errorf("Get with the object's bucket = %v; want the body", err)
	}
	// The object gone: the record still shows.
	if _, err := objects.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String(got.Object.Name)}); err != nil {
		t.Fatal(err)
	}
	if again, err := operator.Inspect(ctx, large, base); err != nil || again.Object == nil {
		t.Errorf("Inspect with the object gone = %+v, %v; want the record", again, err)
	}
	if _, err := operator.Inspect(ctx, large, base.Add(48*time.Hour)); !errors.Is(err, dedupe.ErrNotFound) {
		t.Errorf("Inspect after expiry = %v, want ErrNotFound", err)
	}
}

// laggingIndex is a client whose in-flight index still lists key in
// partition 0, as a global secondary index does for a moment after the
// record completed (GSIs are eventually consistent).
type laggingIndex struct {
	dynamostore.Client
	r   *rig
	key string
}

func (c laggingIndex) Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	out, err := c.Client.Query(ctx, in, opts...)
	if err == nil && aws.ToString(in.IndexName) == dynamostore.DefaultIndex && in.ExclusiveStartKey == nil {
		if n, ok := in.ExpressionAttributeValues[":shard"].(*types.AttributeValueMemberN); ok && n.Value == "0" {
			out.Items = append(out.Items, c.r.key(c.key))
		}
	}
	return out, err
}

// TestInFlightIndexLag: the in-flight index lists a record that has just
// completed with its body in S3. InFlight, on an operator's store without
// LargeResults (dedupe inflight), skips it; it read it as Get does and
// failed ("the result is stored in S3, but Options.LargeResults is not
// set").
func TestInFlightIndexLag(t *testing.T) {
	endpoint := s3Endpoint(t)
	ctx := context.Background()
	objects, bucket := newS3(t, endpoint)
	r := newRig(t)
	writer := r.store(t, dynamostore.Options{LargeResults: dynamostore.LargeResults{Client: objects, Bucket: bucket}})
	key := "lag/" + rand.Text()
	if _, err := writer.Claim(ctx, dedupe.ClaimRequest{Key: key, Fingerprint: "fp", Token: "tok", Now: base,
		LeaseUntil: base.Add(time.Minute), ExpiresAt: base.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := writer.Complete(ctx, dedupe.CompleteRequest{Key: key, Token: "tok", Now: base, ExpiresAt: base.Add(24 * time.Hour),
		Result: dedupe.Result{StatusCode: 201, Body: bigBody(600 << 10)}}); err != nil {
		t.Fatal(err)
	}
	operator, err := dynamostore.New(laggingIndex{r.client, r, key}, dynamostore.Options{Table: r.table})
	if err != nil {
		t.Fatal(err)
	}
	if recs, _, err := operator.InFlight(ctx, base, 100); err != nil || len(recs) != 0 {
		t.Errorf("InFlight = %+v, %v; want nothing in flight", recs, err)
	}
}
