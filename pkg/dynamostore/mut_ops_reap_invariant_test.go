package dynamostore_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/dynamostore"
)

// TestReapWarnsAboveWarnAge pins ReapOptions.WarnAge as documented: a
// cleared record whose claim is more than WarnAge old is logged at warning
// level (its invocation likely died after starting its side effect), one
// exactly WarnAge old or younger at info; zero means DefaultReapWarnAge
// (15 minutes, written out so that a change to the default fails here).
// An operator's alert on the warnings relies on each of these.
func TestReapWarnsAboveWarnAge(t *testing.T) {
	tests := []struct {
		name    string
		warnAge time.Duration
		ages    map[time.Duration]slog.Level // claim age at the run: level of its line
	}{
		{"zero means 15 minutes", 0, map[time.Duration]slog.Level{
			14 * time.Minute: slog.LevelInfo,
			16 * time.Minute: slog.LevelWarn,
		}},
		{"exactly WarnAge is not above it", 15 * time.Minute, map[time.Duration]slog.Level{
			15 * time.Minute:                  slog.LevelInfo,
			15*time.Minute + time.Millisecond: slog.LevelWarn,
			15*time.Minute - time.Millisecond: slog.LevelInfo,
		}},
		{"configured", time.Hour, map[time.Duration]slog.Level{
			30 * time.Minute: slog.LevelInfo,
			90 * time.Minute: slog.LevelWarn,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t)
			s := r.store(t, dynamostore.Options{})
			want := map[string]slog.Level{} // by KeyRef
			for age, level := range tt.ages {
				keys, _ := seedInFlight(t, s, stranded{prefix: fmt.Sprint("age", age), n: 1, claimed: age, lease: time.Minute})
				want[dedupe.KeyRef(keys[0])] = level
			}
			var logs bytes.Buffer
			report, err := s.Reap(context.Background(), dynamostore.ReapOptions{
				Now:     func() time.Time { return base },
				WarnAge: tt.warnAge,
				Logger:  slog.New(slog.NewJSONHandler(&logs, nil)),
			})
			if err != nil || report.Cleared != len(tt.ages) {
				t.Fatalf("Reap = %+v, %v; want %d cleared", report, err, len(tt.ages))
			}
			got := map[string]slog.Level{}
			for _, l := range logLines(t, &logs) {
				var level slog.Level
				if err := level.UnmarshalText([]byte(fmt.Sprint(l["level"]))); err != nil {
					t.Fatalf("log line %v: %v", l, err)
				}
				got[fmt.Sprint(l["key"])] = level
			}
			if len(got) != len(want) {
				t.Errorf("got %d cleared records logged, want %d", len(got), len(want))
			}
			for ref, level := range want {
				if got[ref] != level {
					t.Errorf("%s: got level %v, want %v", ref, got[ref], level)
				}
			}
		})
	}
}

// TestReapNeverRetiresARunningLease: the reaper never retires a record
// whose lease is running when it writes, even one its Query listed as
// stranded. Between the Query and the update, the owner renews its lease
// (its clock a little behind the reaper's, which is what Grace allows
// for): the owner and the status are unchanged, so only the lease fences
// the update. The record stays in its shard with the renewed lease,
// counted as Skipped, and a later run past the new lease end retires it.
func TestReapNeverRetiresARunningLease(t *testing.T) {
	r := newRig(t)
	s := r.store(t, dynamostore.Options{})
	ctx := context.Background()
	keys, tokens := seedInFlight(t, s, stranded{prefix: "renewed", n: 1, claimed: 10 * time.Minute, lease: time.Minute})
	key, token := keys[0], tokens[0]
	leaseEnd := base.Add(-9 * time.Minute)
	renewed := base.Add(5 * time.Minute)
	var hookErr error
	hook := func(ctx context.Context, k string) {
		if k != key {
			return
		}
		hookErr = s.Extend(ctx, dedupe.ExtendRequest{Key: key, Token: token, Now: leaseEnd.Add(-time.Second),
			LeaseUntil: renewed, ExpiresAt: renewed.Add(time.Hour)})
	}
	report, err := s.Reap(ctx, dynamostore.ReapOptions{Now: func() time.Time { return base }, BeforeDelete: hook})
	if err != nil || hookErr != nil {
		t.Fatalf("Reap: %v; renewal: %v", err, hookErr)
	}
	if want := (dynamostore.ReapReport{Found: 1, Skipped: 1, Pages: dynamostore.DefaultShards, ItemsRead: 1}); !equalReport(report, want) {
		t.Errorf("got %+v, want %+v", report, want)
	}
	rec, err := s.Get(ctx, key, base)
	if err != nil || rec.Token != token || rec.Status != dedupe.StatusInProgress || !rec.LeaseExpiresAt.Equal(renewed) {
		t.Errorf("renewed record = %+v, %v; want its owner's, in progress, lease until %v", rec, err, renewed)
	}
	if !r.inIndex(t, key) || r.retired(t, key) {
		t.Errorf("renewed record: in its shard %v, retired %v; want in its shard", r.inIndex(t, key), r.retired(t, key))
	}
	later := renewed.Add(time.Minute)
	if again, err := s.Reap(ctx, dynamostore.ReapOptions{Now: func() time.Time { return later }}); err != nil || again.Cleared != 1 || !r.retired(t, key) {
		t.Errorf("Reap after the renewed lease = %+v, %v; want it retired", again, err)
	}
}

// reapStub is an in-flight index of one stranded record per shard, for a
// Reap in a synctest bubble: Query lists shard's record, UpdateItem
// retires it. It makes no other call.
type reapStub struct {
	dynamostore.Client
	keys map[string]string // by shard, as the Query's :shard holds it
}

func (r *reapStub) Query(_ context.Context, in *dynamodb.QueryInput, _ ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	shard := in.ExpressionAttributeValues[":shard"].(*types.AttributeValueMemberN).Value
	ms := strconv.FormatInt(base.Add(-10*time.Minute).UnixMilli(), 10)
	item := map[string]types.AttributeValue{
		"pk":               &types.AttributeValueMemberS{Value: r.keys[shard]},
		"owner":            &types.AttributeValueMemberS{Value: "tok"},
		"status":           &types.AttributeValueMemberS{Value: string(dedupe.StatusInProgress)},
		"lease_expires_at": &types.AttributeValueMemberN{Value: ms},
		"created_at":       &types.AttributeValueMemberN{Value: ms},
	}
	return &dynamodb.QueryOutput{Items: []map[string]types.AttributeValue{item}, Count: 1, ScannedCount: 1}, nil
}

func (r *reapStub) UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return &dynamodb.UpdateItemOutput{}, nil
}

// TestReapWorkersBoundTheFanOut pins ReapOptions.Workers as documented: at
// most Workers shards are reaped at once (the load an operator allows the
// reaper on the table), never more than there are shards; zero means
// DefaultReapWorkers (4, written out). In a synctest bubble every
// candidate's update waits a second, so all the workers that exist are
// seen inside at once.
func TestReapWorkersBoundTheFanOut(t *testing.T) {
	for _, tt := range []struct {
		name    string
		workers int
		want    int
	}{
		{"one", 1, 1},
		{"two", 2, 2},
		{"zero means 4", 0, 4},
		{"no more than the shards", 100, dynamostore.DefaultShards},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				stub := &reapStub{keys: map[string]string{}}
				s, err := dynamostore.New(stub, dynamostore.Options{Table: "t", GlobalTables: dynamostore.GlobalTablesUnchecked,
					KeySchema: dynamostore.KeySchemaClassic})
				if err != nil {
					t.Fatal(err)
				}
				for i := 0; len(stub.keys) < dynamostore.DefaultShards; i++ {
					k := fmt.Sprintf("fanout/%d", i)
					if sh := strconv.Itoa(s.Shard(k)); stub.keys[sh] == "" {
						stub.keys[sh] = k
					}
				}
				var mu sync.Mutex
				in, most := 0, 0
				hook := func(context.Context, string) {
					mu.Lock()
					in++
					most = max(most, in)
					mu.Unlock()
					time.Sleep(time.Second)
					mu.Lock()
					in--
					mu.Unlock()
				}
				report, err := s.Reap(context.Background(), dynamostore.ReapOptions{Now: func() time.Time { return base },
					Workers: tt.workers, BeforeDelete: hook})
				if err != nil || report.Cleared != dynamostore.DefaultShards || report.Truncated {
					t.Fatalf("Reap = %+v, %v; want every shard's record cleared", report, err)
				}
				if most != tt.want {
					t.Errorf("got %d shards reaped at once, want %d", most, tt.want)
				}
			})
		})
	}
}
