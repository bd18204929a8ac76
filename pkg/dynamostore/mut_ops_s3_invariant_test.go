package dynamostore_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/lambda-dedupe/dedupe/internal/dynamoitem"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/dynamostore"
)

// TestLargeResultsInvariants holds the LargeResults invariants below on one
// S3 endpoint (moto), with the records on the test's DynamoDB server.
func TestLargeResultsInvariants(t *testing.T) {
	endpoint := s3Endpoint(t)
	ctx := context.Background()
	raw, bucket := newS3(t, endpoint)
	r := newRig(t)

	// The record that names its object counts toward Options.MaxItemBytes
	// as DynamoDB counts it (the object's reference included, its size
	// number at its largest, as every number of the estimate): a record
	// that fits MaxItemBytes exactly is completed with its object and
	// replays its body; with one byte less, it is completed without its
	// result (ErrResultTooLarge), never stored larger than the bound.
	t.Run("the record with its object reference is bounded by MaxItemBytes", func(t *testing.T) {
		n := dynamoitem.DefaultNames()
		body := bigBody(3000) // incompressible, under CompressAbove: identity
		// fits is the size of the completed record of key, as DynamoDB
		// counts it with its object reference, the number at its largest.
		fits := func(key, token string) int {
			name := dynamostore.ObjectName(dynamostore.DefaultObjectPrefix, key, token)
			// A map: its name, 3 bytes, and per element its name, its
			// value and 1 byte.
			refAttr := len("res_object") + 3 +
				len("bucket") + len(bucket) + 1 +
				len("key") + len(name) + 1 +
				len("size") + dynamoitem.MaxNumberSize + 1 +
				len("sha256") + 32 + 1
			return dynamoitem.CompletedSize(n, dynamoitem.Completed{Key: key, Token: token, Ref: dedupe.KeyRef(key)}) +
				refAttr + len(n.ResEncoding) + len(dynamoitem.EncodingIdentity)
		}
		for _, tt := range []struct {
			name    string
			less    int // MaxItemBytes is the record's size less this
			omitted bool
		}{
			{"fits exactly", 0, false},
			{"one byte over", 1, true},
		} {
			t.Run(tt.name, func(t *testing.T) {
				k, token := "objfit-"+rand.Text(), "tok-"+rand.Text()
				s, err := dynamostore.New(r.client, dynamostore.Options{Table: r.table, MaxItemBytes: fits(k, token) - tt.less,
					LargeResults: dynamostore.LargeResults{Client: raw, Bucket: bucket}})
				if err != nil {
					t.Fatal(err)
				}
				if res, err := s.Claim(ctx, lifeClaim(k, token, base)); err != nil || !res.Acquired {
					t.Fatalf("claim: %+v, %v", res, err)
				}
				err = s.Complete(ctx, dedupe.CompleteRequest{Key: k, Token: token, Now: base, ExpiresAt: base.Add(time.Hour),
					Result: dedupe.Result{StatusCode: 200, Body: body}})
				if got := errors.Is(err, dedupe.ErrResultTooLarge); got != tt.omitted || (err != nil && !got) {
					t.Fatalf("Complete = %v, want ErrResultTooLarge %v", err, tt.omitted)
				}
				rec, err := s.Get(ctx, k, base)
				if err != nil || rec.Status != dedupe.StatusCompleted || rec.ResultOmitted != tt.omitted {
					t.Fatalf("Get = %+v, %v; want completed, omitted %v", rec, err, tt.omitted)
				}
				if !tt.omitted && (rec.Result == nil || !bytes.Equal(rec.Result.Body, body)) {
					t.Errorf("replayed body differs from the result's")
				}
				_, inS3 := r.rawItem(t, k)["res_object"]
				if inS3 == tt.omitted {
					t.Errorf("record names an object %v, want %v", inS3, !tt.omitted)
				}
			})
		}
	})

	// Every object is written under LargeResults.Prefix, where the role's
	// s3:PutObject grant and the bucket's lifecycle rule are scoped, with
	// the name ObjectName gives: an operator finds it from the key and the
	// owner token. Its record names it and its size as stored.
	t.Run("objects are named under the configured Prefix", func(t *testing.T) {
		const prefix = "tenant-a/results/"
		s, err := dynamostore.New(r.client, dynamostore.Options{Table: r.table,
			LargeResults: dynamostore.LargeResults{Client: raw, Bucket: bucket, Prefix: prefix}})
		if err != nil {
			t.Fatal(err)
		}
		key, token := "prefixed-"+rand.Text(), "tok-"+rand.Text()
		body := bigBody(450 << 10)
		if res, err := s.Claim(ctx, lifeClaim(key, token, base)); err != nil || !res.Acquired {
			t.Fatalf("claim: %+v, %v", res, err)
		}
		if err := s.Complete(ctx, dedupe.CompleteRequest{Key: key, Token: token, Now: base, ExpiresAt: base.Add(time.Hour),
			Result: dedupe.Result{StatusCode: 200, Body: body}}); err != nil {
			t.Fatal(err)
		}
		ins, err := s.Inspect(ctx, key, base)
		want := dynamostore.Object{Bucket: bucket, Name: dynamostore.ObjectName(prefix, key, token), Size: int64(len(body)), Encoding: dynamoitem.EncodingIdentity}
		if err != nil || ins.Object == nil || *ins.Object != want {
			t.Fatalf("Inspect = %+v, %v; want the object %+v", ins.Object, err, want)
		}
		out, err := raw.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(want.Name)})
		if err != nil {
			t.Fatalf("get %s: %v", want.Name, err)
		}
		defer out.Body.Close()
		if got, err := io.ReadAll(out.Body); err != nil || !bytes.Equal(got, body) {
			t.Errorf("object %s holds %d bytes, %v; want the body", want.Name, len(got), err)
		}
		if rec, err := s.Get(ctx, key, base); err != nil || rec.Result == nil || !bytes.Equal(rec.Result.Body, body) {
			t.Errorf("Get = %v; want the body replayed from %s", err, want.Name)
		}
	})

	// A GetObject that fails with any 5xx status is S3 failing, which a
	// later read may get past (ErrResultUnreadable: 503 with Retry-After),
	// whatever its error code, one this store has never heard of
	// included; a 4xx with such a code is S3's answer, which no retry
	// changes (ErrResultOmitted: 409 response unavailable). Neither is
	// ErrStoreUnavailable: the record has been read.
	t.Run("S3 failures by status", func(t *testing.T) {
		hook := &s3Hook{S3Client: raw}
		s, err := dynamostore.New(r.client, dynamostore.Options{Table: r.table, LargeResults: dynamostore.LargeResults{Client: hook, Bucket: bucket}})
		if err != nil {
			t.Fatal(err)
		}
		key := "s3status-" + rand.Text()
		if res, err := s.Claim(ctx, lifeClaim(key, "A", base)); err != nil || !res.Acquired {
			t.Fatalf("claim: %+v, %v", res, err)
		}
		if err := s.Complete(ctx, dedupe.CompleteRequest{Key: key, Token: "A", Now: base, ExpiresAt: base.Add(time.Hour),
			Result: dedupe.Result{StatusCode: 200, Body: bigBody(450 << 10)}}); err != nil {
			t.Fatal(err)
		}
		defer hook.set(nil, nil, false)
		for _, tt := range []struct {
			name   string
			status int
			want   error
		}{
			{"500", 500, dedupe.ErrResultUnreadable},
			{"502", 502, dedupe.ErrResultUnreadable},
			{"499", 499, dedupe.ErrResultOmitted},
			{"403", 403, dedupe.ErrResultOmitted},
		} {
			t.Run(tt.name, func(t *testing.T) {
				hook.set(nil, statusError(tt.status, "NeverHeardOfIt"), false)
				rec, err := s.Get(ctx, key, base)
				if !errors.Is(err, tt.want) || errors.Is(err, dedupe.ErrStoreUnavailable) || rec.Key != key || rec.Result != nil {
					t.Errorf("Get = %+v, %v; want the record without its result and %v, not unavailable", rec, err, tt.want)
				}
			})
		}
	})
}

// statusError is the error the SDK returns for an S3 response with HTTP
// status code and error code code.
func statusError(status int, code string) error {
	return &awshttp.ResponseError{ResponseError: &smithyhttp.ResponseError{
		Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status}},
		Err:      &smithy.GenericAPIError{Code: code, Message: "injected"},
	}}
}
