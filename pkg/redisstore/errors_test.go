package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/lambda-dedupe/dedupe/pkg/redisstore"
)

// redisErr is a server error reply, as go-redis returns them.
type redisErr string

func (e redisErr) Error() string { return string(e) }
func (redisErr) RedisError()     {}

func TestTransient(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"refused", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, true},
		{"reset", fmt.Errorf("read: %w", syscall.ECONNRESET), true},
		{"eof", io.EOF, true},
		{"deadline", context.DeadlineExceeded, true},
		{"pool timeout", redis.ErrPoolTimeout, true},
		{"pool exhausted", redis.ErrPoolExhausted, true},
		{"loading", redisErr("LOADING Redis is loading the dataset in memory"), true},
		{"busy", redisErr("BUSY Redis is busy running a script"), true},
		{"clusterdown", redisErr("CLUSTERDOWN The cluster is down"), true},
		{"max clients", redisErr("ERR max number of clients reached"), true},
		{"canceled", context.Canceled, false},
		{"wrong type", redisErr("WRONGTYPE Operation against a key holding the wrong kind of value"), false},
		{"script error", redisErr("ERR Error running script"), false},
		{"noscript", redis.ErrNoScript, false},
		{"closed client", redis.ErrClosed, false},
		{"other", errors.New("boom"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := redisstore.Transient(tt.err); got != tt.want {
				t.Errorf("transient(%v): got %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}
