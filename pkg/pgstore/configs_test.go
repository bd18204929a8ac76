package pgstore_test

import (
	"context"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lambda-dedupe/dedupe/localtest/pgtest"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe/dedupetest"
	"github.com/lambda-dedupe/dedupe/pkg/pgstore"
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

// configStores returns a dedupetest.ConfigCheck.NewStore whose stores use
// c with opts, each on a table of its own created through admin: every
// history starts empty.
func configStores(admin *pgxpool.Pool, c pgstore.Client, opts pgstore.Options) func(t *testing.T) dedupe.Store {
	return func(t *testing.T) dedupe.Store {
		o := opts
		o.Table = newTable(t, admin)
		return newStore(t, c, o)
	}
}

// TestCheckConfigs runs the configuration checker (issue 17) on pgstore
// on the test server (DATABASE_URL): adapter, principal source, prefix,
// options and sharing drawn per history. The checker's own transient
// claim failures are its only faults; TestCheck and TestLinearizable
// inject faults on the wire.
func TestCheckConfigs(t *testing.T) {
	pool := newPool(t)
	dedupetest.CheckConfigs(t, dedupetest.ConfigCheck{
		Histories: configHistories(60),
		NewStore:  configStores(pool, pool, pgstore.Options{}),
	})
}

// TestCheckConfigsPgBouncer does the same through PgBouncer in
// transaction mode (PGBOUNCER_URL), in the two query modes that keep no
// session state.
func TestCheckConfigsPgBouncer(t *testing.T) {
	url := pgtest.PgBouncerURL(t)
	admin := newPool(t)
	for _, tt := range []struct {
		name string
		mode pgx.QueryExecMode
	}{
		{"exec", pgx.QueryExecModeExec},
		{"simple protocol", pgx.QueryExecModeSimpleProtocol},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := pgxpool.ParseConfig(url)
			if err != nil {
				t.Fatal(err)
			}
			cfg.ConnConfig.DefaultQueryExecMode = tt.mode
			p, err := pgxpool.NewWithConfig(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(p.Close)
			dedupetest.CheckConfigs(t, dedupetest.ConfigCheck{
				Histories: configHistories(30),
				NewStore:  configStores(admin, p, pgstore.Options{ExecMode: tt.mode}),
			})
		})
	}
}
