package dynamostore_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/lambda-dedupe/dedupe/localtest/dynalite"
	"github.com/lambda-dedupe/dedupe/localtest/dynamoserver"
	"github.com/lambda-dedupe/dedupe/localtest/moto"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe/dedupetest"
	"github.com/lambda-dedupe/dedupe/pkg/dynamostore"
)

// s3Endpoint returns an S3 endpoint for the test: AWS_ENDPOINT_URL_S3 when
// set; the DynamoDB endpoint when it is moto_server (which serves S3 on the
// same port, through its serializing proxy); else a moto_server started for
// the test. Without moto_server the test is skipped, or fails in CI.
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
	t.Cleanup(func() {
		if err := srv.Stop(); err != nil {
			t.Errorf("stop moto_server: %v", err)
		}
	})
	return srv.Endpoint()
}

// newS3 returns an S3 client for endpoint (path-style, dummy credentials)
// and a fresh bucket on it.
func newS3(t *testing.T, endpoint string) (*s3.Client, string) {
	t.Helper()
	c := s3.New(s3.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(endpoint),
		UsePathStyle: true,
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "x", SecretAccessKey: "x", Source: "s3test"}, nil
		}),
	})
	bucket := strings.ToLower("dedupe-" + rand.Text()[:12])
	if _, err := c.CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatalf("create bucket: %v", err)
	}
	return c, bucket
}

// s3Hook is an S3Client that runs before (if set) ahead of each PutObject
// and can fail calls, for races and faults.
type s3Hook struct {
	dynamostore.S3Client
	mu        sync.Mutex
	beforePut func(in *s3.PutObjectInput)
	failPut   error
	failGet   error
	cutGet    bool // the transfer of a GetObject's body is cut halfway
	puts      int
}

// set changes the hook's faults under its lock: failPut, failGet, cutGet.
func (h *s3Hook) set(put, get error, cut bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.failPut, h.failGet, h.cutGet = put, get, cut
}

// cutBody yields the first half of a body, then io.ErrUnexpectedEOF, as
// the SDK's body does when the connection drops mid-transfer.
type cutBody struct {
	io.ReadCloser
	left int64
}

func (c *cutBody) Read(p []byte) (int, error) {
	if c.left <= 0 {
		return 0, io.ErrUnexpectedEOF
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.ReadCloser.Read(p)
	c.left -= int64(n)
	return n, err
}

func (h *s3Hook) PutObject(ctx context.Context, in *s3.PutObjectInput, o ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	h.mu.Lock()
	before, fail := h.beforePut, h.failPut
	h.beforePut = nil
	h.puts++
	h.mu.Unlock()
	if before != nil {
		before(in)
	}
	if fail != nil {
		return nil, fail
	}
	return h.S3Client.PutObject(ctx, in, o...)
}

func (h *s3Hook) GetObject(ctx context.Context, in *s3.GetObjectInput, o ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	h.mu.Lock()
	fail, cut := h.failGet, h.cutGet
	h.mu.Unlock()
	if fail != nil {
		return nil, fail
	}
	out, err := h.S3Client.GetObject(ctx, in, o...)
	if err == nil && cut {
		out.Body = &cutBody{ReadCloser: out.Body, left: aws.ToInt64(out.ContentLength) / 2}
	}
	return out, err
}

// bigBody returns n random (incompressible) bytes.
func bigBody(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

// TestLargeResults runs every LargeResults case on one S3 endpoint (moto),
// with the records on the test's DynamoDB server.
func TestLargeResults(t *testing.T) {
	endpoint := s3Endpoint(t)
	ctx := context.Background()
	raw, bucket := newS3(t, endpoint)
	r := newRig(t)
	hook := &s3Hook{S3Client: raw}
	store := func(t *testing.T, c dynamostore.Client) *dynamostore.Store {
		s, err := dynamostore.New(c, dynamostore.Options{Table: r.table, LargeResults: dynamostore.LargeResults{Client: hook, Bucket: bucket}})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	claim := func(t *testing.T, s *dynamostore.Store, key, token string, now time.Time) {
		t.Helper()
		res, err := s.Claim(ctx, dedupe.ClaimRequest{Key: key, Fingerprint: "fp", Token: token, Now: now,
			LeaseUntil: now.Add(time.Minute), ExpiresAt: now.Add(time.Hour)})
		if err != nil || !res.Acquired {
			t.Fatalf("claim by %s: %+v, %v; want acquired", token, res, err)
		}
	}
	complete := func(s *dynamostore.Store, key, token string, body []byte, now time.Time) error {
		return s.Complete(ctx, dedupe.CompleteRequest{Key: key, Token: token, Now: now, ExpiresAt: now.Add(24 * time.Hour),
			Result: dedupe.Result{StatusCode: 200, Headers: map[string][]string{"Content-Type": {"application/octet-stream"}}, Body: body}})
	}
	objectOf := func(t *testing.T, key string) (string, []byte) {
		t.Helper()
		m, ok := r.rawItem(t, key)["res_object"].(*types.AttributeValueMemberM)
		if !ok {
			t.Fatalf("record of %s has no res_object map", key)
		}
		name := m.Value["key"].(*types.AttributeValueMemberS).Value
		out, err := raw.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(name)})
		if err != nil {
			t.Fatalf("get object %s: %v", name, err)
		}
		defer out.Body.Close()
		b, _ := io.ReadAll(out.Body)
		return name, b
	}

	t.Run("replayed byte for byte", func(t *testing.T) {
		s := store(t, r.client)
		g := dedupe.New(s, &dedupe.Config{Prefix: "large", Now: (&clock{now: base}).Now})
		for _, n := range []int{100, 500 << 10, 6 << 20} {
			want := dedupe.Result{StatusCode: 201, Headers: map[string][]string{"X-Latin1": {"caf\xe9"}}, Body: bigBody(n)}
			key := "big-" + rand.Text()
			runs := 0
			fn := func(context.Context) (dedupe.Result, error) { runs++; return want, nil }
			if out, err := g.Do(ctx, dedupe.Call{Key: key, Fingerprint: "fp"}, fn); err != nil || !out.Stored {
				t.Fatalf("%d bytes: first run %+v, %v; want stored", n, out, err)
			}
			start := time.Now()
			out, err := g.Do(ctx, dedupe.Call{Key: key, Fingerprint: "fp"}, fn)
			t.Logf("%d bytes: replay in %v", n, time.Since(start))
			if err != nil || !out.Replayed || runs != 1 {
				t.Fatalf("%d bytes: replay %+v, %v after %d runs; want a replay after 1", n, out.Replayed, err, runs)
			}
			if !bytes.Equal(out.Result.Body, want.Body) || out.Result.Headers["X-Latin1"][0] != "caf\xe9" || out.Result.StatusCode != 201 {
				t.Errorf("%d bytes: replayed result differs from the stored one", n)
			}
			item := r.rawItem(t, g.Key(key))
			_, inItem := item["res_body"]
			_, inS3 := item["res_object"]
			if wantS3 := n > 400<<10; inS3 != wantS3 || inItem == wantS3 {
				t.Errorf("%d bytes: res_body present %v, res_object present %v; want the body in S3 %v", n, inItem, inS3, wantS3)
			}
			if inS3 {
				name, _ := objectOf(t, g.Key(key))
				if strings.Contains(name, key) {
					t.Errorf("object name %q reveals the key", name)
				}
			}
		}
	})

	t.Run("object tampered, truncated or missing", func(t *testing.T) {
		s := store(t, r.client)
		now := base
		for _, tt := range []struct {
			name   string
			tamper func(name string, body []byte)
		}{
			{"one byte changed", func(name string, body []byte) {
				body[len(body)/2] ^= 1
				put(t, raw, bucket, name, body)
			}},
			{"truncated", func(name string, body []byte) { put(t, raw, bucket, name, body[:len(body)-1]) }},
			{"longer", func(name string, body []byte) { put(t, raw, bucket, name, append(body, 0)) }},
			{"missing", func(name string, _ []byte) {
				if _, err := raw.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String(name)}); err != nil {
					t.Fatal(err)
				}
			}},
		} {
			t.Run(tt.name, func(t *testing.T) {
				key := "tamper-" + rand.Text()
				claim(t, s, key, "tok", now)
				if err := complete(s, key, "tok", bigBody(450<<10), now); err != nil {
					t.Fatal(err)
				}
				name, body := objectOf(t, key)
				tt.tamper(name, body)
				rec, err := s.Get(ctx, key, now)
				if !errors.Is(err, dynamostore.ErrObjectInvalid) || !errors.Is(err, dedupe.ErrResultOmitted) || errors.Is(err, dedupe.ErrStoreUnavailable) ||
					rec.Key != key || rec.Status != dedupe.StatusCompleted || rec.Fingerprint != "fp" || rec.Result != nil {
					t.Errorf("Get = %+v, %v; want the record without its result, ErrObjectInvalid and ErrResultOmitted, not unavailable", rec, err)
				}
				res, err := s.Claim(ctx, dedupe.ClaimRequest{Key: key, Fingerprint: "fp", Token: "again", Now: now,
					LeaseUntil: now.Add(time.Minute), ExpiresAt: now.Add(time.Hour)})
				if !errors.Is(err, dynamostore.ErrObjectInvalid) || !errors.Is(err, dedupe.ErrResultOmitted) || res.Acquired || res.Record.Token != "tok" {
					t.Errorf("Claim = %+v, %v; want the record, ErrObjectInvalid and ErrResultOmitted", res, err)
				}
			})
		}
	})

	t.Run("S3 refuses or fails the upload: recorded without the result", func(t *testing.T) {
		// Issue 29, item 4: a bucket that is missing, or a prefix the role
		// may not write, must never leave a finished request in flight
		// (a retry after the lease would run it again). Nor must S3 still
		// failing after the SDK's retries.
		missing, err := dynamostore.New(r.client, dynamostore.Options{Table: r.table,
			LargeResults: dynamostore.LargeResults{Client: raw, Bucket: "no-such-bucket-" + strings.ToLower(rand.Text()[:8])}})
		if err != nil {
			t.Fatal(err)
		}
		for _, tt := range []struct {
			name string
			s    *dynamostore.Store
			fail error
		}{
			{"a bucket that does not exist", missing, nil},
			{"a prefix outside the grant", store(t, r.client), &smithy.GenericAPIError{Code: "AccessDenied", Message: "Access Denied"}},
			{"S3 still throttling after the SDK's retries", store(t, r.client), &smithy.GenericAPIError{Code: "SlowDown", Message: "reduce your request rate"}},
		} {
			t.Run(tt.name, func(t *testing.T) {
				key := "s3down-" + rand.Text()
				claim(t, tt.s, key, "A", base)
				hook.set(tt.fail, nil, false)
				err := complete(tt.s, key, "A", bigBody(450<<10), base)
				hook.set(nil, nil, false)
				if !errors.Is(err, dedupe.ErrResultTooLarge) || errors.Is(err, dedupe.ErrStoreUnavailable) || !strings.Contains(err.Error(), "LargeResults") {
					t.Fatalf("Complete = %v, want ErrResultTooLarge naming LargeResults, not unavailable", err)
				}
				rec, err := tt.s.Get(ctx, key, base)
				if err != nil || rec.Status != dedupe.StatusCompleted || !rec.ResultOmitted {
					t.Fatalf("record after the failed upload: %+v, %v; want completed without its result", rec, err)
				}
				// After the lease, a retry is a duplicate: never run again.
				later := base.Add(2 * time.Minute)
				res, err := tt.s.Claim(ctx, dedupe.ClaimRequest{Key: key, Fingerprint: "fp", Token: "B", Now: later,
					LeaseUntil: later.Add(time.Minute), ExpiresAt: later.Add(time.Hour)})
				if err != nil || res.Acquired || !res.Record.ResultOmitted {
					t.Errorf("retry after the lease: %+v, %v; want the omitted record, not acquired", res, err)
				}
			})
		}
	})

	t.Run("through the guard: a missing bucket never runs a finished request twice", func(t *testing.T) {
		s, err := dynamostore.New(r.client, dynamostore.Options{Table: r.table,
			LargeResults: dynamostore.LargeResults{Client: raw, Bucket: "no-such-bucket-" + strings.ToLower(rand.Text()[:8])}})
		if err != nil {
			t.Fatal(err)
		}
		clk := &clock{now: base}
		g := dedupe.New(s, &dedupe.Config{Prefix: "large", Now: clk.Now, FailOpen: true})
		key := "nobucket-" + rand.Text()
		runs := 0
		fn := func(context.Context) (dedupe.Result, error) {
			runs++
			return dedupe.Result{StatusCode: 201, Body: bigBody(450 << 10)}, nil
		}
		if _, err := g.Do(ctx, dedupe.Call{Key: key, Fingerprint: "fp"}, fn); !errors.Is(err, dedupe.ErrResultTooLarge) {
			t.Fatalf("first run: %v, want ErrResultTooLarge", err)
		}
		for range 4 {
			clk.now = clk.now.Add(10 * time.Minute) // past every lease
			if _, err := g.Do(ctx, dedupe.Call{Key: key, Fingerprint: "fp"}, fn); !errors.Is(err, dedupe.ErrResultOmitted) {
				t.Errorf("retry: %v, want ErrResultOmitted", err)
			}
		}
		if runs != 1 {
			t.Errorf("the handler ran %d times, want once", runs)
		}
	})

	t.Run("lost completion after a successful upload", func(t *testing.T) {
		down := errors.New("connection reset")
		failUpdate := false
		var mu sync.Mutex
		s := store(t, faultClient{Client: r.client, fail: func(op string) error {
			mu.Lock()
			defer mu.Unlock()
			if op == "UpdateItem" && failUpdate {
				return &smithy.GenericAPIError{Code: "InternalServerError", Message: down.Error()}
			}
			return nil
		}})
		key := "lost-" + rand.Text()
		claim(t, s, key, "A", base)
		mu.Lock()
		failUpdate = true
		mu.Unlock()
		first := bigBody(450 << 10)
		if err := complete(s, key, "A", first, base); !errors.Is(err, dedupe.ErrStoreUnavailable) {
			t.Fatalf("Complete = %v, want ErrStoreUnavailable", err)
		}
		mu.Lock()
		failUpdate = false
		mu.Unlock()
		// A's object was written, but nothing references it.
		objA := dynamostore.ObjectName(dynamostore.DefaultObjectPrefix, key, "A")
		if _, err := raw.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(objA)}); err != nil {
			t.Fatalf("A's object: %v; want it uploaded before the completion", err)
		}
		if rec, err := s.Get(ctx, key, base); err != nil || rec.Status != dedupe.StatusInProgress {
			t.Fatalf("record: %+v, %v; want in flight", rec, err)
		}
		later := base.Add(2 * time.Minute)
		claim(t, s, key, "B", later)
		second := bigBody(450 << 10)
		if err := complete(s, key, "B", second, later); err != nil {
			t.Fatal(err)
		}
		rec, err := s.Get(ctx, key, later)
		if err != nil || !bytes.Equal(rec.Result.Body, second) {
			t.Fatalf("replay: %v; want the body of the completion that succeeded", err)
		}
		if name, _ := objectOf(t, key); name == objA {
			t.Errorf("the record references A's unreferenced object %s", name)
		}
	})

	t.Run("a takeover racing an upload", func(t *testing.T) {
		s := store(t, r.client)
		key := "race-" + rand.Text()
		claim(t, s, key, "A", base)
		later := base.Add(2 * time.Minute)
		winner := bigBody(450 << 10)
		// While A uploads (its lease has run out), B takes over, uploads
		// and completes. A's upload then lands, and its completion fails.
		hook.mu.Lock()
		hook.beforePut = func(*s3.PutObjectInput) {
			claim(t, s, key, "B", later)
			if err := complete(s, key, "B", winner, later); err != nil {
				t.Errorf("B's completion: %v", err)
			}
		}
		hook.mu.Unlock()
		err := complete(s, key, "A", bigBody(450<<10), later)
		if !errors.Is(err, dedupe.ErrLeaseLost) {
			t.Fatalf("A's late completion = %v, want ErrLeaseLost", err)
		}
		objA := dynamostore.ObjectName(dynamostore.DefaultObjectPrefix, key, "A")
		if _, err := raw.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(objA)}); err != nil {
			t.Fatalf("A's object: %v; want it written (and never read)", err)
		}
		rec, err := s.Get(ctx, key, later)
		if err != nil || rec.Token != "B" || !bytes.Equal(rec.Result.Body, winner) {
			t.Fatalf("replay: token %q, %v; want B's body", rec.Token, err)
		}
		if name, _ := objectOf(t, key); name == objA {
			t.Errorf("the record references the late owner's object")
		}
	})

	t.Run("S3 read failures are answers, not unavailable", func(t *testing.T) {
		s := store(t, r.client)
		key := "getdown-" + rand.Text()
		claim(t, s, key, "A", base)
		if err := complete(s, key, "A", bigBody(450<<10), base); err != nil {
			t.Fatal(err)
		}
		defer hook.set(nil, nil, false)
		for _, tt := range []struct {
			name string
			get  error
			cut  bool
			want error
		}{
			{"InternalError", &smithy.GenericAPIError{Code: "InternalError", Message: "try again"}, false, dedupe.ErrResultUnreadable},
			{"SlowDown", &smithy.GenericAPIError{Code: "SlowDown", Message: "reduce your request rate"}, false, dedupe.ErrResultUnreadable},
			{"a reset", &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}, false, dedupe.ErrResultUnreadable},
			{"a timeout", context.DeadlineExceeded, false, dedupe.ErrResultUnreadable},
			{"a transfer cut mid-body", nil, true, dedupe.ErrResultUnreadable},
			{"AccessDenied", &smithy.GenericAPIError{Code: "AccessDenied", Message: "Access Denied"}, false, dedupe.ErrResultOmitted},
		} {
			t.Run(tt.name, func(t *testing.T) {
				hook.set(nil, tt.get, tt.cut)
				rec, err := s.Get(ctx, key, base)
				if !errors.Is(err, tt.want) || errors.Is(err, dedupe.ErrStoreUnavailable) || rec.Key != key || rec.Fingerprint != "fp" || rec.Result != nil {
					t.Errorf("Get = %+v, %v; want the record without its result and %v, not unavailable", rec, err, tt.want)
				}
				res, err := s.Claim(ctx, dedupe.ClaimRequest{Key: key, Fingerprint: "fp", Token: "again", Now: base,
					LeaseUntil: base.Add(time.Minute), ExpiresAt: base.Add(time.Hour)})
				if !errors.Is(err, tt.want) || errors.Is(err, dedupe.ErrStoreUnavailable) || res.Acquired || res.Record.Status != dedupe.StatusCompleted {
					t.Errorf("Claim = %+v, %v; want the completed record and %v", res, err, tt.want)
				}
			})
		}
		hook.set(nil, nil, false)
		if rec, err := s.Get(ctx, key, base); err != nil || rec.Result == nil {
			t.Errorf("Get once S3 answers again = %v; want the replay", err)
		}
	})

	t.Run("through the guard and the adapter: FailOpen never runs a completed request", func(t *testing.T) {
		// Issue 29, items 1, 2 and 5: the record says COMPLETED and its
		// body cannot be fetched. The same request gets 503 with
		// Retry-After (never a second run, FailOpen or not); another
		// request gets 422 whatever S3 does; a cut transfer is 503, not
		// 500.
		s := store(t, r.client)
		g := dedupe.New(s, &dedupe.Config{Prefix: "large-fo", Now: (&clock{now: base}).Now, FailOpen: true, Logger: slog.New(slog.DiscardHandler)})
		runs := 0
		body := bigBody(450 << 10)
		h := dedupe.HTTPAPI(g, &dedupe.HTTPConfig{SharedScope: true, Logger: slog.New(slog.DiscardHandler)},
			func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
				runs++
				return events.APIGatewayV2HTTPResponse{StatusCode: 201, Body: base64.StdEncoding.EncodeToString(body), IsBase64Encoded: true}, nil
			})
		key := "fo-" + rand.Text()
		send := func(reqBody string) events.APIGatewayV2HTTPResponse {
			t.Helper()
			resp, err := h(ctx, events.APIGatewayV2HTTPRequest{RouteKey: "POST /pay", RawPath: "/pay",
				Headers: map[string]string{"idempotency-key": key}, Body: reqBody,
				RequestContext: events.APIGatewayV2HTTPRequestContext{HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "POST", Path: "/pay"}}})
			if err != nil {
				t.Fatalf("HTTPAPI: %v", err)
			}
			return resp
		}
		if resp := send(`{"amount":1}`); resp.StatusCode != 201 || runs != 1 {
			t.Fatalf("first request = %d after %d runs", resp.StatusCode, runs)
		}
		defer hook.set(nil, nil, false)
		for _, tt := range []struct {
			name    string
			get     error
			cut     bool
			body    string
			status  int
			problem string
		}{
			{"SlowDown, the same request", &smithy.GenericAPIError{Code: "SlowDown", Message: "reduce your request rate"}, false, `{"amount":1}`, 503, dedupe.ProblemResultUnreadable},
			{"SlowDown, another request", &smithy.GenericAPIError{Code: "SlowDown", Message: "reduce your request rate"}, false, `{"amount":2}`, 422, dedupe.ProblemKeyReused},
			{"cut transfer, the same request", nil, true, `{"amount":1}`, 503, dedupe.ProblemResultUnreadable},
			{"cut transfer, another request", nil, true, `{"amount":2}`, 422, dedupe.ProblemKeyReused},
			{"missing object, the same request", &s3types.NoSuchKey{Message: aws.String("gone")}, false, `{"amount":1}`, 409, dedupe.ProblemResultUnavailable},
			{"S3 answers again", nil, false, `{"amount":1}`, 201, ""},
		} {
			hook.set(nil, tt.get, tt.cut)
			resp := send(tt.body)
			var p dedupe.Problem
			json.Unmarshal([]byte(resp.Body), &p)
			if resp.StatusCode != tt.status || p.Type != tt.problem || runs != 1 {
				t.Errorf("%s: %d %s after %d runs; want %d %s and the one first run", tt.name, resp.StatusCode, p.Type, runs, tt.status, tt.problem)
			}
			if tt.status == 503 && resp.Headers["Retry-After"] == "" {
				t.Errorf("%s: 503 without Retry-After", tt.name)
			}
			if tt.status == 201 && resp.Headers[dedupe.HeaderReplayed] != "true" {
				t.Errorf("%s: want the replay", tt.name)
			}
		}
	})

	t.Run("InFlight skips a record completed meanwhile whose object is gone", func(t *testing.T) {
		// The index listed the key while it was in flight; by the read
		// it is completed, and its object missing. InFlight must not fail
		// on a body it does not need (found by CheckConfigs).
		s := store(t, r.client)
		key := "inflight-race-" + rand.Text()
		now := base.Add(3000 * time.Hour)
		claim(t, s, key, "A", now)
		if err := complete(s, key, "A", bigBody(450<<10), now); err != nil {
			t.Fatal(err)
		}
		name, _ := objectOf(t, key)
		if _, err := raw.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String(name)}); err != nil {
			t.Fatal(err)
		}
		if _, err := r.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(r.table),
			Key:                       r.key(key),
			UpdateExpression:          aws.String("SET inflight_shard = :s"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":s": &types.AttributeValueMemberN{Value: fmt.Sprint(s.Shard(key))}},
		}); err != nil {
			t.Fatal(err)
		}
		recs, _, err := s.InFlight(ctx, now, 1000)
		if err != nil {
			t.Fatalf("InFlight = %v, want no error", err)
		}
		for _, rec := range recs {
			if rec.Key == key {
				t.Errorf("InFlight listed the completed record")
			}
		}
	})

	t.Run("a store without LargeResults refuses the record", func(t *testing.T) {
		s := store(t, r.client)
		key := "noopt-" + rand.Text()
		claim(t, s, key, "A", base)
		if err := complete(s, key, "A", bigBody(450<<10), base); err != nil {
			t.Fatal(err)
		}
		plain := r.store(t, dynamostore.Options{})
		if rec, err := plain.Get(ctx, key, base); !errors.Is(err, dynamostore.ErrObjectInvalid) || !errors.Is(err, dedupe.ErrResultOmitted) || rec.Token != "A" {
			t.Errorf("Get without LargeResults = %v, want ErrObjectInvalid", err)
		}
		other, err := dynamostore.New(r.client, dynamostore.Options{Table: r.table, LargeResults: dynamostore.LargeResults{Client: raw, Bucket: "another"}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := other.Get(ctx, key, base); !errors.Is(err, dynamostore.ErrObjectInvalid) {
			t.Errorf("Get with another bucket = %v, want ErrObjectInvalid", err)
		}
	})
}

// put writes body to bucket/name.
func put(t *testing.T, c *s3.Client, bucket, name string, body []byte) {
	t.Helper()
	if _, err := c.PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(name), Body: bytes.NewReader(body)}); err != nil {
		t.Fatalf("put %s: %v", name, err)
	}
}

func TestLargeResultsOptions(t *testing.T) {
	c := dynamodb.New(dynamodb.Options{Region: "us-east-1"})
	s3c := s3.New(s3.Options{Region: "us-east-1"})
	tests := []struct {
		name    string
		large   dynamostore.LargeResults
		wantErr string
	}{
		{"unset", dynamostore.LargeResults{}, ""},
		{"both", dynamostore.LargeResults{Client: s3c, Bucket: "b"}, ""},
		{"client without bucket", dynamostore.LargeResults{Client: s3c}, "LargeResults.Bucket"},
		{"bucket without client", dynamostore.LargeResults{Bucket: "b"}, "LargeResults.Client"},
		{"prefix alone", dynamostore.LargeResults{Prefix: "p/"}, "LargeResults.Prefix"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := dynamostore.New(c, dynamostore.Options{Table: "t", LargeResults: tt.large, GlobalTables: dynamostore.GlobalTablesUnchecked, KeySchema: dynamostore.KeySchemaByRef})
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("New = %v, want nil", err)
			case tt.wantErr != "" && (!errors.Is(err, dynamostore.ErrInvalidOptions) || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("New = %v, want ErrInvalidOptions naming %s", err, tt.wantErr)
			}
		})
	}
}

func TestObjectNameHidesKey(t *testing.T) {
	a := dynamostore.ObjectName("p/", "fn\x00api\x00order-42", "tok1")
	b := dynamostore.ObjectName("p/", "fn\x00api\x00order-42", "tok2")
	if a == b || !strings.HasPrefix(a, "p/") || strings.Contains(a, "order") {
		t.Errorf("names %q and %q: want distinct per token, prefixed, without the key", a, b)
	}
	if a[:strings.LastIndex(a, "/")] != b[:strings.LastIndex(b, "/")] {
		t.Errorf("names %q and %q: want one folder per key", a, b)
	}
}

// faultS3 fails GetObject as fault says: unreadable is a throttle, or a
// transfer cut mid-body when cut is set; gone is a missing object.
type faultS3 struct {
	dynamostore.S3Client
	fault func() dedupetest.ResultFault
	cut   bool
}

func (f faultS3) GetObject(ctx context.Context, in *s3.GetObjectInput, o ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	switch f.fault() {
	case dedupetest.ResultUnreadableNow:
		if !f.cut {
			return nil, &smithy.GenericAPIError{Code: "SlowDown", Message: "reduce your request rate"}
		}
		out, err := f.S3Client.GetObject(ctx, in, o...)
		if err == nil {
			out.Body = &cutBody{ReadCloser: out.Body, left: aws.ToInt64(out.ContentLength) / 2}
		}
		return out, err
	case dedupetest.ResultGone:
		return nil, &s3types.NoSuchKey{Message: aws.String("The specified key does not exist.")}
	}
	return f.S3Client.GetObject(ctx, in, o...)
}

// TestExternalResultsContract runs the contract suite's cases for results
// kept outside the record on LargeResults (moto's S3), with a throttle and
// with a cut transfer as the transient read failure.
func TestExternalResultsContract(t *testing.T) {
	raw, bucket := newS3(t, s3Endpoint(t))
	r := newRig(t)
	for _, cut := range []bool{false, true} {
		t.Run(map[bool]string{false: "throttled", true: "cut transfer"}[cut], func(t *testing.T) {
			dedupetest.RunExternalResults(t, dedupetest.ExternalResults{
				Threshold: 4096,
				NewStore: func(t *testing.T, fault func() dedupetest.ResultFault) dedupe.Store {
					return r.store(t, dynamostore.Options{MaxItemBytes: 4096, CompressAbove: -1,
						LargeResults: dynamostore.LargeResults{Client: faultS3{S3Client: raw, fault: fault, cut: cut}, Bucket: bucket}})
				},
			})
		})
	}
}
