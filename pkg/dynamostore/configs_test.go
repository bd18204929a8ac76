package dynamostore_test

import (
	"crypto/rand"
	"os"
	"testing"

	"github.com/lambda-dedupe/dedupe/localtest/dynamoserver"
	"github.com/lambda-dedupe/dedupe/localtest/dynamotest"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe/dedupetest"
	"github.com/lambda-dedupe/dedupe/pkg/dynamostore"
)

// configHistories returns the number of configuration histories for a
// short run in make test, def, unless DEDUPE_CONFIG_HISTORIES asks for
// another number (0 leaves it to dedupetest.CheckConfigs, which reads
// it).
func configHistories(def int) int {
	if os.Getenv("DEDUPE_CONFIG_HISTORIES") != "" {
		return 0
	}
	return def
}

// TestCheckConfigs runs the configuration checker (issue 17) on
// dynamostore on the test endpoint (dynalite, or moto in make test's
// second pass): adapter, principal source, prefix, options and sharing
// drawn per history. The checker's own transient claim failures are its
// only faults; TestCheck and TestLinearizable inject faults in the HTTP
// transport.
//
// Every history needs an empty store. On the template's table that is a
// table per history, which costs a CreateTable, so only a few histories
// run there; the rest run on one single-table design table, each history
// under a sort key value of its own.
func TestCheckConfigs(t *testing.T) {
	c := dynamotest.Client(t)
	t.Run("template table", func(t *testing.T) {
		dedupetest.CheckConfigs(t, dedupetest.ConfigCheck{
			Histories: configHistories(4),
			NewStore: func(t *testing.T) dedupe.Store {
				table := dynamotest.CreateTables(t, c, "IdempotencyTable")["IdempotencyTable"]
				s, err := dynamostore.New(c, dynamostore.Options{Table: table})
				if err != nil {
					t.Fatal(err)
				}
				return s
			},
		})
	})
	t.Run("single table", func(t *testing.T) {
		table := dynamotest.UniqueName("dedupe-configs")
		createTable(t, c, table, schema{
			pk: "PK", sk: "SK", shard: "GSI1PK", lease: "lease_ms", index: "GSI1",
			projectedKeys: []string{"own", "st", "created_at"},
		})
		attrs := dynamostore.Attributes{
			PartitionKey: "PK", Status: "st", Owner: "own", LeaseExpiresAt: "lease_ms",
			ExpiresAt: "ttl", InflightShard: "GSI1PK", ResBody: "body",
		}
		// moto answers each call several times slower than dynalite.
		n := 25
		if dynamoserver.ServerKind() == dynamoserver.Moto {
			n = 12
		}
		dedupetest.CheckConfigs(t, dedupetest.ConfigCheck{
			Histories: configHistories(n),
			NewStore: func(t *testing.T) dedupe.Store {
				s, err := dynamostore.New(c, dynamostore.Options{
					Table: table, SortKey: dynamostore.SortKey{Name: "SK", Value: "IDEMPOTENCY#" + rand.Text()},
					Attributes: attrs, Index: "GSI1",
				})
				if err != nil {
					t.Fatal(err)
				}
				return s
			},
		})
	})
}
