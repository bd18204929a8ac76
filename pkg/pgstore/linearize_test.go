package pgstore_test

import (
	"context"
	"net"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lambda-dedupe/dedupe/localtest/pgtest"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe/dedupetest"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe/dedupetest/linearize"
	"github.com/lambda-dedupe/dedupe/pkg/pgstore"
)

// linearizeStores returns a linearize.Config.NewStore whose stores reach
// url through connections that ask inject before each statement
// (faultConn), on one table, with opts.
func linearizeStores(url string, opts pgstore.Options) func(t *testing.T, inject dedupetest.Injector) dedupe.Store {
	return func(t *testing.T, inject dedupetest.Injector) dedupe.Store {
		cfg, err := pgxpool.ParseConfig(url)
		if err != nil {
			t.Fatal(err)
		}
		var d net.Dialer
		cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &faultConn{Conn: c, inject: inject}, nil
		}
		p, err := pgxpool.NewWithConfig(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		return newStore(t, p, opts)
	}
}

// TestLinearizable checks that pgstore is linearizable against memstore's
// semantics, under concurrent clients with faults injected into the
// connections pgx dials; the store's own attempts resend.
func TestLinearizable(t *testing.T) {
	table := newTable(t, newPool(t))
	linearize.Check(t, linearize.Config{StrictFirstToken: true, NewStore: linearizeStores(pgtest.URL(t), pgstore.Options{Table: table})})
}

// TestLinearizablePgBouncer does the same through PgBouncer in
// transaction mode (PGBOUNCER_URL), in the two query modes that keep no
// session state: consecutive statements of one client connection run on
// whichever server connection PgBouncer hands out.
func TestLinearizablePgBouncer(t *testing.T) {
	url := pgtest.PgBouncerURL(t)
	table := newTable(t, newPool(t))
	for _, tt := range []struct {
		name string
		mode pgx.QueryExecMode
	}{
		{"exec", pgx.QueryExecModeExec},
		{"simple protocol", pgx.QueryExecModeSimpleProtocol},
	} {
		t.Run(tt.name, func(t *testing.T) {
			linearize.Check(t, linearize.Config{StrictFirstToken: true, NewStore: linearizeStores(url, pgstore.Options{Table: table, ExecMode: tt.mode})})
		})
	}
}
