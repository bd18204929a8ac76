package dynamostore_test

import (
	"context"
	"crypto/rand"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe/dedupetest"
	"github.com/lambda-dedupe/dedupe/pkg/dynamostore"
)

// noAllOld is a client whose conditional failures carry no item, as from
// a server that ignores ReturnValuesOnConditionCheckFailure (dynalite),
// so the store reads the record after a failed condition; readFails
// fails those reads.
type noAllOld struct {
	dynamostore.Client
	readFails bool
}

func (c *noAllOld) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	out, err := c.Client.PutItem(ctx, in, o...)
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return out, &types.ConditionalCheckFailedException{Message: ccf.Message}
	}
	return out, err
}

func (c *noAllOld) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	out, err := c.Client.UpdateItem(ctx, in, o...)
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return out, &types.ConditionalCheckFailedException{Message: ccf.Message}
	}
	return out, err
}

func (c *noAllOld) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	if c.readFails {
		return nil, &smithy.GenericAPIError{Code: "InternalServerError", Message: "try again"}
	}
	return c.Client.GetItem(ctx, in, o...)
}

// TestClaimAnswersAreNotUnavailable classifies the error paths of a claim
// that learnt something before a later step failed (issue 29, the rule):
// each is an answer, never dedupe.ErrStoreUnavailable, so FailOpen never
// runs the work for it.
func TestClaimAnswersAreNotUnavailable(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	claimReq := func(key, token string, now time.Time) dedupe.ClaimRequest {
		return dedupe.ClaimRequest{Key: key, Fingerprint: "fp", Token: token, Now: now,
			LeaseUntil: now.Add(time.Minute), ExpiresAt: now.Add(time.Hour)}
	}

	t.Run("a failed condition, then a failed read", func(t *testing.T) {
		c := &noAllOld{Client: r.client}
		s, err := dynamostore.New(c, dynamostore.Options{Table: r.table})
		if err != nil {
			t.Fatal(err)
		}
		key := "ccf-read-" + rand.Text()
		if res, err := s.Claim(ctx, claimReq(key, "A", base)); err != nil || !res.Acquired {
			t.Fatalf("first claim: %+v, %v", res, err)
		}
		c.readFails = true
		res, err := s.Claim(ctx, claimReq(key, "B", base))
		if !errors.Is(err, dedupe.ErrInProgress) || errors.Is(err, dedupe.ErrStoreUnavailable) || res.Acquired {
			t.Errorf("Claim = %+v, %v; want a concurrent writer (ErrInProgress), never unavailable", res, err)
		}
		// A read that fails for good stays what it is (not in flight).
		c.readFails = false
	})

	t.Run("a takeover whose fenced write fails", func(t *testing.T) {
		fail := false
		s, err := dynamostore.New(faultClient{Client: r.client, fail: func(op string) error {
			if op == "PutItem" && fail {
				return &smithy.GenericAPIError{Code: "InternalServerError", Message: "try again"}
			}
			return nil
		}}, dynamostore.Options{Table: r.table})
		if err != nil {
			t.Fatal(err)
		}
		key := "takeover-" + rand.Text()
		if res, err := s.Claim(ctx, claimReq(key, "A", base)); err != nil || !res.Acquired {
			t.Fatalf("first claim: %+v, %v", res, err)
		}
		// A record from before first_token, which the claim's update does
		// not take: the fenced PutItem does.
		if _, err := r.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(r.table),
			Key: r.key(key), UpdateExpression: aws.String("REMOVE first_token")}); err != nil {
			t.Fatal(err)
		}
		later := base.Add(2 * time.Minute) // A's lease has run out
		n := 0
		s2, err := dynamostore.New(faultClient{Client: r.client, fail: func(op string) error {
			if op == "PutItem" {
				if n++; n == 1 { // the claim's update fails its condition; the fenced write fails
					return &smithy.GenericAPIError{Code: "InternalServerError", Message: "try again"}
				}
			}
			return nil
		}}, dynamostore.Options{Table: r.table})
		if err != nil {
			t.Fatal(err)
		}
		res, err := s2.Claim(ctx, claimReq(key, "B", later))
		if !errors.Is(err, dedupe.ErrInProgress) || errors.Is(err, dedupe.ErrStoreUnavailable) || res.Acquired || res.Record.Token != "A" {
			t.Errorf("Claim = %+v, %v; want in flight with the stranded record seen, never unavailable", res, err)
		}
		// Through the guard with FailOpen: nothing runs.
		n = 0
		g := dedupe.New(s2, &dedupe.Config{Prefix: "", Unprefixed: true, FailOpen: true, Now: func() time.Time { return later },
			Logger: slog.New(slog.DiscardHandler)})
		runs := 0
		_, err = g.Do(ctx, dedupe.Call{Key: key, Fingerprint: "fp"}, func(context.Context) (dedupe.Result, error) { runs++; return dedupe.Result{StatusCode: 201}, nil })
		var conflict *dedupe.ConflictError
		if !errors.As(err, &conflict) || !errors.Is(err, dedupe.ErrInProgress) || runs != 0 {
			t.Errorf("Run = %v after %d runs; want a ConflictError in progress, no run", err, runs)
		}
		_ = fail
	})

	t.Run("a context cancelled by the caller is neither", func(t *testing.T) {
		s := r.store(t, dynamostore.Options{})
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		_, err := s.Claim(cctx, claimReq("cancelled-"+rand.Text(), "A", base))
		if err == nil || errors.Is(err, dedupe.ErrStoreUnavailable) || errors.Is(err, dedupe.ErrInProgress) {
			t.Errorf("Claim with a cancelled context = %v, want its error, neither unavailable nor in flight", err)
		}
	})

	t.Run("a deadline is unavailable", func(t *testing.T) {
		s := r.store(t, dynamostore.Options{})
		dctx, cancel := context.WithDeadline(ctx, time.Now().Add(-time.Second))
		defer cancel()
		_, err := s.Claim(dctx, claimReq("deadline-"+rand.Text(), "A", base))
		if !errors.Is(err, dedupe.ErrStoreUnavailable) {
			t.Errorf("Claim past its deadline = %v, want ErrStoreUnavailable (no answer was received)", err)
		}
	})
}

// TestLeanAdmin (issue 29, item 6): every Admin method of a Lean store
// does what its contract says, or refuses; InFlight, which the sparse
// index serves and a Lean claim never writes, refuses with
// errors.ErrUnsupported instead of answering nothing.
func TestLeanAdmin(t *testing.T) {
	r := newRig(t)
	s := r.store(t, dynamostore.Options{Lean: true})
	ctx := context.Background()
	key := "lean-admin-" + rand.Text()
	if res, err := s.Claim(ctx, dedupe.ClaimRequest{Key: key, Fingerprint: "fp", Token: "A", Now: base,
		LeaseUntil: base.Add(time.Minute), ExpiresAt: base.Add(time.Hour)}); err != nil || !res.Acquired {
		t.Fatalf("claim: %+v, %v", res, err)
	}
	// Stranded: its lease has run out.
	recs, truncated, err := s.InFlight(ctx, base.Add(2*time.Minute), 100)
	if !errors.Is(err, errors.ErrUnsupported) || len(recs) != 0 || truncated {
		t.Errorf("InFlight on a Lean store = %d records, %v, %v; want a refusal wrapping errors.ErrUnsupported", len(recs), truncated, err)
	}
	dedupetest.RunAdmin(t, func(t *testing.T) dedupe.Store { return r.store(t, dynamostore.Options{Lean: true}) })
}
