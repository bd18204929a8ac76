package redisstore_test

import (
	"testing"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe/dedupetest"
	"github.com/lambda-dedupe/dedupe/pkg/redisstore"
)

func TestAdmin(t *testing.T) {
	c := newClient(t)
	dedupetest.RunAdmin(t, func(t *testing.T) dedupe.Store {
		return newStore(t, c, redisstore.Options{Prefix: "admintest:" + t.Name() + ":", RefIndex: true})
	})
}
