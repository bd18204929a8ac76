package cli_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/lambda-dedupe/dedupe/cmd/dedupe/internal/cli"
	"github.com/lambda-dedupe/dedupe/localtest/dynalite"
	"github.com/lambda-dedupe/dedupe/localtest/dynamoserver"
	"github.com/lambda-dedupe/dedupe/localtest/moto"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/dynamostore"
)

// s3Endpoint returns an S3 endpoint: AWS_ENDPOINT_URL_S3 when set; the
// DynamoDB endpoint when it is moto_server, which serves S3 too; else a
// moto_server started for the test (skipped without one, failed in CI).
func s3Endpoint(t *testing.T) string {
	t.Helper()
	if ep := os.Getenv("AWS_ENDPOINT_URL_S3"); ep != "" {
		return ep
	}
	if dynamoserver.ServerKind() == dynamoserver.Moto {
		return dynalite.Endpoint(t)
	}
	if _, err := exec.LookPath(moto.DefaultBin); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("moto_server is required in CI for the S3 tests: %s", moto.InstallHint)
		}
		t.Skipf("moto_server not found: %s", moto.InstallHint)
	}
	srv, err := moto.Start(context.Background(), moto.Options{})
	if err != nil {
		t.Fatalf("start moto_server for S3: %v", err)
	}
	t.Cleanup(func() { srv.Stop() })
	return srv.Endpoint()
}

// TestLargeResponse is the operator's day with a response the functions
// keep in S3 (LargeResults): show names the object without reading it,
// --body reads it from the bucket the record names (s3:GetObject, the
// only S3 call the command makes), and forget deletes the record without
// any S3 call, leaving the object to the bucket's lifecycle.
func TestLargeResponse(t *testing.T) {
	b := backends(t)[0]
	endpoint := s3Endpoint(t)
	ctx := context.Background()
	objects := s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String(endpoint), UsePathStyle: true,
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "x", SecretAccessKey: "x"}, nil
		})})
	bucket := strings.ToLower("cli-" + rand.Text()[:12])
	if _, err := objects.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}
	writer, err := dynamostore.New(b.dynamo, dynamostore.Options{Table: b.table,
		LargeResults: dynamostore.LargeResults{Client: objects, Bucket: bucket}})
	if err != nil {
		t.Fatal(err)
	}
	raw := make([]byte, 600<<10)
	rand.Read(raw)
	body := base64.StdEncoding.EncodeToString(raw) // printable, too large even gzipped
	key := dedupe.StoreKey(prefix, "large/"+rand.Text())
	ref := dedupe.KeyRef(key)
	now := time.Now()
	if _, err := writer.Claim(ctx, dedupe.ClaimRequest{Key: key, Fingerprint: "fp", Token: "tok", Now: now,
		LeaseUntil: now.Add(time.Minute), ExpiresAt: now.Add(time.Hour), RequestID: "req-large"}); err != nil {
		t.Fatal(err)
	}
	if err := writer.Complete(ctx, dedupe.CompleteRequest{Key: key, Token: "tok", Now: now, ExpiresAt: now.Add(time.Hour),
		Result: dedupe.Result{StatusCode: 200, Headers: map[string][]string{"Content-Type": {"text/plain"}}, Body: []byte(body)}}); err != nil {
		t.Fatal(err)
	}
	name := dynamostore.ObjectName(dynamostore.DefaultObjectPrefix, key, "tok")
	// No S3 reachable: show and forget must not need it.
	noS3 := append([]string{"--s3-endpoint", "http://127.0.0.1:1"}, b.flags...)
	withS3 := append([]string{"--s3-endpoint", endpoint}, b.flags...)

	code, out, errOut := run(t, "", append([]string{"show", ref}, noS3...)...)
	if code != cli.ExitOK || !strings.Contains(out, "response:     200, body in S3: s3://"+bucket+"/"+name+", ") {
		t.Errorf("show: exit %d\n%s%s\nwant the object named", code, out, errOut)
	}
	code, out, _ = run(t, "", append([]string{"show", "--stored-key", key, "-o", "json"}, noS3...)...)
	var v struct {
		ResponseStatus int
		ResponseBytes  *int
		ResponseObject struct {
			Bucket, Name, Encoding string
			Size                   int64
		}
	}
	decodeJSON(t, out, &v)
	head, err := objects.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	if code != cli.ExitOK || v.ResponseStatus != 200 || v.ResponseBytes != nil || v.ResponseObject.Bucket != bucket ||
		v.ResponseObject.Name != name || v.ResponseObject.Size != aws.ToInt64(head.ContentLength) || v.ResponseObject.Encoding != dynamostore.EncodingGzip {
		t.Errorf("show -o json: exit %d, %+v; want the object, its %d bytes, gzip", code, v, aws.ToInt64(head.ContentLength))
	}
	code, out, errOut = run(t, "", append([]string{"show", ref, "--body"}, withS3...)...)
	if code != cli.ExitOK || out != body {
		t.Errorf("show --body: exit %d, %d bytes (%s); want the body, %d bytes", code, len(out), errOut, len(body))
	}
	code, out, _ = run(t, "", append([]string{"show", ref, "--body", "-o", "json"}, withS3...)...)
	var full struct {
		Body    []byte
		Headers map[string][]string
	}
	decodeJSON(t, out, &full)
	if code != cli.ExitOK || string(full.Body) != body || full.Headers["Content-Type"][0] != "text/plain" {
		t.Errorf("show --body -o json: exit %d, %d bytes; want the body and headers", code, len(full.Body))
	}
	if code, _, errOut := run(t, "", append([]string{"show", ref, "--body"}, noS3...)...); code != cli.ExitError || !strings.Contains(errOut, "s3://"+bucket+"/"+name) {
		t.Errorf("show --body with S3 down: exit %d, %q; want %d naming the object", code, errOut, cli.ExitError)
	}
	code, out, errOut = run(t, "", append([]string{"forget", ref, "--token", "tok", "--reason", "INC-9", "--yes"}, noS3...)...)
	if code != cli.ExitOK || !strings.Contains(out, "s3://"+bucket+"/"+name) || !strings.Contains(errOut, `"response_object":"s3://`+bucket+"/"+name+`"`) {
		t.Errorf("forget: exit %d\n%s%s\nwant it forgotten, the object named", code, out, errOut)
	}
	if code, _, _ := run(t, "", append([]string{"show", ref}, noS3...)...); code != cli.ExitNotFound {
		t.Errorf("show after forget: exit %d, want %d", code, cli.ExitNotFound)
	}
}

// TestBodyItemResponse: a response body kept in a body item (one that
// would push the record past a write unit) is shown by show --body, read
// with the record; when its body item is gone, show still shows the
// record, and --body fails instead of printing an empty body.
func TestBodyItemResponse(t *testing.T) {
	b := backends(t)[0]
	ctx := context.Background()
	writer, err := dynamostore.New(b.dynamo, dynamostore.Options{Table: b.table})
	if err != nil {
		t.Fatal(err)
	}
	body := strings.Repeat(rand.Text()+"\n", 120) // about 3 KB, printable
	key := dedupe.StoreKey(prefix, "body-item/"+rand.Text())
	ref := dedupe.KeyRef(key)
	now := time.Now()
	if _, err := writer.Claim(ctx, dedupe.ClaimRequest{Key: key, Fingerprint: "fp", Token: "tok", Now: now,
		LeaseUntil: now.Add(time.Minute), ExpiresAt: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := writer.Complete(ctx, dedupe.CompleteRequest{Key: key, Token: "tok", Now: now, ExpiresAt: now.Add(time.Hour),
		Result: dedupe.Result{StatusCode: 200, Body: []byte(body)}}); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := run(t, "", append([]string{"show", ref, "--body"}, b.flags...)...)
	if code != cli.ExitOK || out != body {
		t.Fatalf("show --body: exit %d, %d bytes (%s); want the body, %d bytes", code, len(out), errOut, len(body))
	}
	if _, err := b.dynamo.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(b.table),
		Key: map[string]types.AttributeValue{"ref": &types.AttributeValueMemberS{Value: dedupe.KeyRef(dynamostore.BodyItemKey(key, "tok"))},
			"pk": &types.AttributeValueMemberS{Value: dynamostore.BodyItemKey(key, "tok")}}}); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := run(t, "", append([]string{"show", ref}, b.flags...)...); code != cli.ExitOK || !strings.Contains(out, "200") {
		t.Errorf("show without its body item: exit %d\n%s%s\nwant the record", code, out, errOut)
	}
	code, out, errOut = run(t, "", append([]string{"show", ref, "--body"}, b.flags...)...)
	if code == cli.ExitOK || out != "" || !strings.Contains(errOut, "body item") {
		t.Errorf("show --body without its body item: exit %d, %q (%s); want a failure naming the body item", code, out, errOut)
	}
}
