package dynamostore_test

import (
	"hash/fnv"
	"strings"
	"testing"

	"github.com/lambda-dedupe/dedupe/pkg/dynamostore"
)

// TestShardIsFNV1a holds Shard to its documented rule, hash/fnv's 32-bit
// FNV-1a of the key modulo the shard count: every writer and the reaper
// must agree on it, across versions too.
func TestShardIsFNV1a(t *testing.T) {
	keys := []string{"", "a", "bench#http:bench/$default|POST /payments|7d993324d0668c66e1afcf6f14691d0a|k", "clé-ü-€-😀", strings.Repeat("x\xff", 700)}
	for _, shards := range []int{1, 7, dynamostore.DefaultShards, 1000} {
		s, err := dynamostore.New(nopClient{}, dynamostore.Options{Table: "t", Shards: shards, GlobalTables: dynamostore.GlobalTablesUnchecked, KeySchema: dynamostore.KeySchemaByRef})
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			h := fnv.New32a()
			h.Write([]byte(k))
			if got, want := s.Shard(k), int(h.Sum32()%uint32(shards)); got != want {
				t.Errorf("Shard(%q) with %d shards = %d, want %d", k, shards, got, want)
			}
		}
	}
}

// nopClient is a Client that is never called.
type nopClient struct{ dynamostore.Client }
