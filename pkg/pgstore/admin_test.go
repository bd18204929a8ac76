package pgstore_test

import (
	"context"
	"strings"
	"testing"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe/dedupetest"
	"github.com/lambda-dedupe/dedupe/pkg/pgstore"
)

func TestAdmin(t *testing.T) {
	p := newPool(t)
	table := newTable(t, p)
	dedupetest.RunAdmin(t, func(t *testing.T) dedupe.Store { return newStore(t, p, pgstore.Options{Table: table}) })
}

// TestMigrationAddsProvenance applies the schema as it was before the
// provenance columns (001 and 002), writes a row the old way, then runs
// CreateSchema (which adds 003): the row reads with an empty request ID and trace, new rows keep
// theirs, and the ref lookup can use its index.
func TestMigrationAddsProvenance(t *testing.T) {
	ctx := context.Background()
	p := newPool(t)
	old := pgstore.Migration + "\n" + pgstore.MigrationFirstToken
	table := "dedupetest_old_" + strings.ToLower(dedupe.KeyRef(t.Name())[4:])
	p.Exec(ctx, "DROP TABLE IF EXISTS "+table)
	t.Cleanup(func() { p.Exec(context.Background(), "DROP TABLE IF EXISTS "+table) })
	if _, err := p.Exec(ctx, strings.ReplaceAll(old, pgstore.DefaultTable, table)); err != nil {
		t.Fatalf("old schema: %v", err)
	}
	_, err := p.Exec(ctx, `INSERT INTO `+table+` (key, status, fingerprint, owner, lease_expires_at, expires_at,
		created_at, updated_at, res_status, res_omitted) VALUES ($1, 'COMPLETED', 'fp', 'tok', 0, $2, 0, 0, 201, false)`,
		[]byte("old-key"), base.Unix()+3600)
	if err != nil {
		t.Fatalf("old row: %v", err)
	}
	if err := pgstore.CreateSchema(ctx, p, table); err != nil {
		t.Fatalf("CreateSchema over the old table: %v", err)
	}
	s := newStore(t, p, pgstore.Options{Table: table})
	rec, err := s.Get(ctx, "old-key", base)
	if err != nil || rec.RequestID != "" || rec.Trace != "" || rec.Result == nil || rec.Result.StatusCode != 201 {
		t.Fatalf("Get old row = %+v, %v; want it, without provenance", rec, err)
	}
	recs, err := s.FindRef(ctx, dedupe.KeyRef("old-key"), base)
	if err != nil || len(recs) != 1 {
		t.Fatalf("FindRef old row = %+v, %v; want it", recs, err)
	}

	// The lookup's expression is the index's: with sequential scans off,
	// the planner uses the index.
	tx, err := p.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "SET LOCAL enable_seqscan = off"); err != nil {
		t.Fatal(err)
	}
	var plan strings.Builder
	rows, err := tx.Query(ctx, "EXPLAIN SELECT key FROM "+table+
		" WHERE ('key:' || left(encode(sha256(key), 'hex'), 12)) = 'key:000000000000'")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var line string
		rows.Scan(&line)
		plan.WriteString(line + "\n")
	}
	if !strings.Contains(plan.String(), table+"_ref_idx") {
		t.Errorf("plan does not use the ref index:\n%s", plan.String())
	}
}
