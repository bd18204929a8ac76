package ensuretest_test

import (
	"testing"

	"github.com/lambda-dedupe/dedupe/infra"
	"github.com/lambda-dedupe/dedupe/localtest/dynamoserver"
	"github.com/lambda-dedupe/dedupe/localtest/dynamotest"
)

// TestEnsureTablesTTLByServer pins, by server name (dynamoserver.ServerKind),
// what TestEnsureTablesDynalite tolerates either way: moto has the TTL API,
// so TTL ends up enabled on expires_at; dynalite has none, so EnsureTables
// reports it unsupported instead of failing.
func TestEnsureTablesTTLByServer(t *testing.T) {
	client := dynamotest.Client(t)
	tables := uniqueTables(t, client)
	results, err := infra.EnsureTables(t.Context(), client, tables[:1])
	if err != nil {
		t.Fatal(err)
	}
	got := results[0]
	server := dynamoserver.ServerKind()
	has, known := dynamoserver.HasTTLAPI()
	switch {
	case !known:
		t.Logf("%s: TTL enabled %v, unsupported %v", server, got.TTLEnabled, got.TTLUnsupported)
	case has && (!got.TTLEnabled || got.TTLUnsupported != nil):
		t.Errorf("%s has the TTL API: got %+v, want TTL enabled on expires_at", server, got)
	case !has && (got.TTLEnabled || got.TTLUnsupported == nil):
		t.Errorf("%s has no TTL API: got %+v, want TTL reported unsupported", server, got)
	}
}
