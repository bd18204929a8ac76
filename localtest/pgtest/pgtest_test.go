package pgtest_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/lambda-dedupe/dedupe/localtest/pgtest"
)

func TestStartStop(t *testing.T) {
	ctx := context.Background()
	srv, err := pgtest.Start(ctx, pgtest.Options{})
	if errors.Is(err, pgtest.ErrNotInstalled) && os.Getenv(pgtest.EnvCI) == "" {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	c, err := pgconn.Connect(ctx, srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Exec(ctx, "SHOW max_connections; SELECT current_user").ReadAll()
	c.Close(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(res[0].Rows[0][0]); got != "300" {
		t.Errorf("max_connections = %s, want 300", got)
	}
	if got := string(res[1].Rows[0][0]); got != "postgres" {
		t.Errorf("current_user = %s, want postgres", got)
	}
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if c, err := pgconn.Connect(cctx, srv.URL()); err == nil {
		c.Close(ctx)
		t.Error("server still accepts connections after Stop")
	}
	if err := srv.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}

func TestNotInstalled(t *testing.T) {
	_, err := pgtest.Start(context.Background(), pgtest.Options{BinDir: "/nonexistent"})
	if !errors.Is(err, pgtest.ErrNotInstalled) {
		t.Errorf("got %v, want ErrNotInstalled", err)
	}
}
