package dynamostore_test

import (
	"context"
	"crypto/rand"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/dynamostore"
)

func lifeClaim(k, tok string, now time.Time) dedupe.ClaimRequest {
	return dedupe.ClaimRequest{Key: k, Fingerprint: "fp", Token: tok, Now: now,
		LeaseUntil: now.Add(time.Minute), ExpiresAt: now.Add(time.Hour)}
}

// TestFirstToken checks which claims start a new life (FirstToken is the
// claim's token) and which keep the record's life: a takeover of a
// stranded record and the owner's own re-claim keep it, a claim of an
// expired record starts a new one, and an item written before first_token
// existed is taken over with its owner as the life. It runs on dynalite
// and on moto (make test runs the package on both).
func TestFirstToken(t *testing.T) {
	r := newRig(t)
	s := r.store(t, dynamostore.Options{})
	ctx := context.Background()
	stranded := base.Add(2 * time.Minute) // past the first claim's lease, inside its expiry
	expired := base.Add(2 * time.Hour)
	claimBy := func(t *testing.T, k, tok string, now time.Time, wantFirst string) {
		t.Helper()
		res, err := s.Claim(ctx, lifeClaim(k, tok, now))
		if err != nil || !res.Acquired || res.Record.FirstToken != wantFirst {
			t.Fatalf("claim by %s: %+v, %v; want acquired with FirstToken %s", tok, res, err, wantFirst)
		}
	}
	claimA := func(t *testing.T, k string) { claimBy(t, k, "tok-a", base, "tok-a") }
	cases := []struct {
		name  string
		setup func(t *testing.T, k string)
		tok   string
		now   time.Time
		want  string
	}{
		{"fresh key", func(*testing.T, string) {}, "tok-a", base, "tok-a"},
		{"own re-claim keeps the life", claimA, "tok-a", base.Add(time.Second), "tok-a"},
		{"takeover keeps the life", claimA, "tok-b", stranded, "tok-a"},
		{"expired record starts a new life", claimA, "tok-b", expired, "tok-b"},
		{"takeover of a takeover keeps the first", func(t *testing.T, k string) {
			claimA(t, k)
			claimBy(t, k, "tok-x", stranded, "tok-a")
		}, "tok-b", stranded.Add(2 * time.Minute), "tok-a"},
		{"item without first_token: its owner is the life", func(t *testing.T, k string) {
			claimA(t, k)
			_, err := r.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
				TableName:                aws.String(r.table),
				Key:                      r.key(k),
				UpdateExpression:         aws.String("SET #owner = :old REMOVE first_token"),
				ExpressionAttributeNames: map[string]string{"#owner": "owner"},
				ExpressionAttributeValues: map[string]types.AttributeValue{
					":old": &types.AttributeValueMemberS{Value: "tok-old"},
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			if rec, err := s.Get(ctx, k, base); err != nil || rec.FirstToken != "" || rec.Life() != "tok-old" {
				t.Fatalf("old item reads as %+v, %v; want no FirstToken, life tok-old", rec, err)
			}
		}, "tok-b", stranded, "tok-old"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			k := rand.Text()
			tc.setup(t, k)
			res, err := s.Claim(ctx, lifeClaim(k, tc.tok, tc.now))
			if err != nil || !res.Acquired {
				t.Fatalf("claim: %+v, %v; want acquired", res, err)
			}
			if res.Record.FirstToken != tc.want {
				t.Errorf("claim's FirstToken: got %q, want %q", res.Record.FirstToken, tc.want)
			}
			rec, err := s.Get(ctx, k, tc.now)
			if err != nil || rec.FirstToken != tc.want || rec.Token != tc.tok {
				t.Errorf("Get: got %+v, %v; want FirstToken %q, Token %q", rec, err, tc.want, tc.tok)
			}
			if got, ok := r.rawItem(t, k)["first_token"].(*types.AttributeValueMemberS); !ok || got.Value != tc.want {
				t.Errorf("stored first_token: got %v, want %q", r.rawItem(t, k)["first_token"], tc.want)
			}
		})
	}
}

// doubleSend sends every PutItem and UpdateItem twice and returns the
// second reply, as the SDK's retryer does when the first reply is lost
// after the write was applied.
type doubleSend struct{ dynamostore.Client }

func (c doubleSend) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if _, err := c.Client.UpdateItem(ctx, in, o...); err != nil {
		return nil, err
	}
	return c.Client.UpdateItem(ctx, in, o...)
}

func (c doubleSend) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	if _, err := c.Client.PutItem(ctx, in, o...); err != nil {
		return nil, err
	}
	return c.Client.PutItem(ctx, in, o...)
}

// TestClaimResentWrites: a fresh claim whose write is resent after it was
// applied is still a new life, a takeover whose write is resent still
// keeps the taken-over record's life, and an expired record's new life
// resent is still the new life.
func TestClaimResentWrites(t *testing.T) {
	r := newRig(t)
	plain := r.store(t, dynamostore.Options{})
	s, err := dynamostore.New(doubleSend{r.client}, dynamostore.Options{Table: r.table})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	k := rand.Text()
	res, err := s.Claim(ctx, lifeClaim(k, "tok-a", base))
	if err != nil || !res.Acquired || res.Record.FirstToken != "tok-a" {
		t.Fatalf("fresh claim sent twice: %+v, %v; want acquired, FirstToken tok-a", res, err)
	}
	k2 := rand.Text()
	if res, err := plain.Claim(ctx, lifeClaim(k2, "tok-a", base)); err != nil || !res.Acquired {
		t.Fatal(res, err)
	}
	res, err = s.Claim(ctx, lifeClaim(k2, "tok-b", base.Add(2*time.Minute)))
	if err != nil || !res.Acquired || res.Record.FirstToken != "tok-a" {
		t.Fatalf("takeover sent twice: %+v, %v; want acquired, FirstToken tok-a", res, err)
	}
	if rec, err := plain.Get(ctx, k2, base.Add(2*time.Minute)); err != nil || rec.Token != "tok-b" || rec.FirstToken != "tok-a" {
		t.Errorf("after the takeover: %+v, %v", rec, err)
	}
	// An expired record's new life, its PutItem sent twice.
	expired := base.Add(2 * time.Hour)
	res, err = s.Claim(ctx, lifeClaim(k2, "tok-c", expired))
	if err != nil || !res.Acquired || res.Record.FirstToken != "tok-c" {
		t.Fatalf("new life sent twice: %+v, %v; want acquired, FirstToken tok-c", res, err)
	}
	if rec, err := plain.Get(ctx, k2, expired); err != nil || rec.Token != "tok-c" || rec.FirstToken != "tok-c" {
		t.Errorf("after the new life: %+v, %v", rec, err)
	}
}

// TestTakeoverFence: the claim's UpdateItem takes a free record in one
// call, its condition checked where the record is; a free record it
// cannot take (one without first_token, written before it existed) is
// taken over by a fenced PutItem. When that record changes between the
// failed claim and the fenced write, the fenced write must not replace
// it. A
// racing takeover by another attempt of the same request wins; the claim
// then sees a record held by another token under a running lease and is
// not acquired, and the winner's record is left as it wrote it. A racing
// completion likewise leaves the completed record alone.
func TestTakeoverFence(t *testing.T) {
	r := newRig(t)
	plain := r.store(t, dynamostore.Options{})
	ctx := context.Background()
	stranded := base.Add(2 * time.Minute)
	cases := []struct {
		name   string
		race   func(t *testing.T, k string)
		wantTo string // the record's owner afterwards
		status dedupe.Status
	}{
		{"racing takeover", func(t *testing.T, k string) {
			if res, err := plain.Claim(ctx, lifeClaim(k, "tok-c", stranded)); err != nil || !res.Acquired {
				t.Errorf("racing takeover: %+v, %v", res, err)
			}
		}, "tok-c", dedupe.StatusInProgress},
		{"racing completion", func(t *testing.T, k string) {
			if err := plain.Complete(ctx, dedupe.CompleteRequest{Key: k, Token: "tok-a", Now: stranded, ExpiresAt: stranded.Add(time.Hour),
				Result: dedupe.Result{StatusCode: 200}}); err != nil {
				t.Errorf("racing completion: %v", err)
			}
		}, "tok-a", dedupe.StatusCompleted},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			k := rand.Text()
			if res, err := plain.Claim(ctx, lifeClaim(k, "tok-a", base)); err != nil || !res.Acquired {
				t.Fatal(res, err)
			}
			// A record from before first_token.
			if _, err := r.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(r.table),
				Key: r.key(k), UpdateExpression: aws.String("REMOVE first_token")}); err != nil {
				t.Fatal(err)
			}
			c := &racer{Client: r.client, races: []func(){func() { tc.race(t, k) }}}
			s, err := dynamostore.New(c, dynamostore.Options{Table: r.table})
			if err != nil {
				t.Fatal(err)
			}
			res, err := s.Claim(ctx, lifeClaim(k, "tok-b", stranded))
			if err != nil || res.Acquired {
				t.Fatalf("claim against a racing write: %+v, %v; want not acquired", res, err)
			}
			if res.Record.Token != tc.wantTo || res.Record.Status != tc.status {
				t.Errorf("claim returned %+v; want the racing write's record (owner %s, %s)", res.Record, tc.wantTo, tc.status)
			}
			rec, err := plain.Get(ctx, k, stranded)
			if err != nil || rec.Token != tc.wantTo || rec.Status != tc.status || rec.Life() != "tok-a" {
				t.Errorf("record after the race: %+v, %v; want owner %s, %s, life tok-a", rec, err, tc.wantTo, tc.status)
			}
		})
	}
}
