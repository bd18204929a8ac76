package redisstore_test

import (
	"context"
	"errors"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/redisstore"
)

// inspectFaults is a client of the test server whose CONFIG GET and INFO
// fail with the errors set (nil: passed through), as a server does that
// drops the connection, or that an ACL denies the command.
type inspectFaults struct {
	*redis.Client
	configErr, infoErr error
}

func (c inspectFaults) ConfigGet(ctx context.Context, parameter string) *redis.MapStringStringCmd {
	if c.configErr == nil {
		return c.Client.ConfigGet(ctx, parameter)
	}
	cmd := redis.NewMapStringStringCmd(ctx)
	cmd.SetErr(c.configErr)
	return cmd
}

func (c inspectFaults) Info(ctx context.Context, section ...string) *redis.StringCmd {
	if c.infoErr == nil {
		return c.Client.Info(ctx, section...)
	}
	cmd := redis.NewStringCmd(ctx)
	cmd.SetErr(c.infoErr)
	return cmd
}

// errNoPerm is what a server answers a command an ACL denies.
var errNoPerm = redisErr("NOPERM User dedupe has no permissions to run the 'info' command")

// TestEvictionCheckNeverTakesAFailureForARefusal: when New cannot read
// the policy because the server did not answer (a reset, a refused
// connection), it fails with dedupe.ErrStoreUnavailable, even with
// NoEvictionVerified and INFO denied: the flag vouches only for a policy
// the server refuses to tell, never for one it could not be asked, which
// may well be an evicting one. A denied CONFIG GET is a refusal, and New
// reads INFO instead; only both denied is what the flag vouches for.
func TestEvictionCheckNeverTakesAFailureForARefusal(t *testing.T) {
	c := newClient(t)
	for _, tt := range []struct {
		name               string
		configErr, infoErr error
		verified           bool
		want               error // nil: accepted
	}{
		{"CONFIG GET unanswered, INFO denied, verified", errRefused, errNoPerm, true, dedupe.ErrStoreUnavailable},
		{"CONFIG GET unanswered, INFO denied", errRefused, errNoPerm, false, dedupe.ErrStoreUnavailable},
		{"CONFIG GET denied, INFO unanswered, verified", errNoPerm, errRefused, true, dedupe.ErrStoreUnavailable},
		{"CONFIG GET denied, INFO readable", errNoPerm, nil, false, nil},
		{"both denied, verified", errNoPerm, errNoPerm, true, nil},
		{"both denied", errNoPerm, errNoPerm, false, redisstore.ErrEvictionPolicy},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := redisstore.New(inspectFaults{c, tt.configErr, tt.infoErr}, redisstore.Options{NoEvictionVerified: tt.verified})
			if tt.want == nil && err != nil || tt.want != nil && !errors.Is(err, tt.want) {
				t.Errorf("New: got %v, want %v", err, tt.want)
			}
			if tt.want == dedupe.ErrStoreUnavailable && errors.Is(err, redisstore.ErrEvictionPolicy) {
				t.Errorf("New: got %v, want the failure to reach the server, not a policy refusal", err)
			}
		})
	}
}
