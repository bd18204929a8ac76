package pgstore

import (
	"context"
	_ "embed"
	"fmt"
	"regexp"
	"strings"
)

// Migration is the schema of the store's table, as a migration file
// (migrations/001_dedupe_records.sql) for tools that apply SQL files. It
// names the table dedupe_records, DefaultTable. Apply
// MigrationFirstToken, MigrationProvenance, MigrationFunctions,
// MigrationComplete and MigrationRetired after it, in that order.
//
//go:embed migrations/001_dedupe_records.sql
var Migration string

// MigrationFirstToken is the second migration file
// (migrations/002_first_token.sql): it adds the nullable columns
// first_token and first_token_owner that hold dedupe.Record.FirstToken.
// The store's statements name them, so apply it before deploying this
// version; rows written before it read with an empty FirstToken, and
// writers of earlier versions keep working beside it.
//
//go:embed migrations/002_first_token.sql
var MigrationFirstToken string

// MigrationProvenance is the third migration file
// (migrations/003_provenance.sql): it adds the nullable columns
// request_id and trace (dedupe.Record.RequestID and Trace) and the
// expression index on the key's dedupe.KeyRef that Store.FindRef reads.
// The store's statements name the columns, so apply it before deploying
// this version; rows written before it read with both fields empty.
//
//go:embed migrations/003_provenance.sql
var MigrationProvenance string

// MigrationFunctions is the fourth migration file
// (migrations/004_functions.sql): it creates the PL/pgSQL function
// dedupe_records_claim, the claim Store.Claim calls. PostgreSQL caches
// its plans per session, so behind a pooler that cannot keep prepared
// statements (PgBouncer in transaction mode, RDS Proxy) a claim is not
// planned again on every call, and a duplicate is answered by a plain
// read. The function is named after the table: for a table other than
// dedupe_records, put its name in place of dedupe_records throughout the
// file, as CreateSchema does. The store calls it, so apply it before
// deploying this version; it changes no table, and writers of earlier
// versions keep working beside it. It is idempotent (CREATE OR REPLACE)
// but, like any CREATE OR REPLACE FUNCTION, must not run from two
// sessions at once; CreateSchema takes a lock first, so it may.
//
//go:embed migrations/004_functions.sql
var MigrationFunctions string

// MigrationComplete is the fifth migration file
// (migrations/005_complete.sql): it creates the PL/pgSQL function
// dedupe_records_complete, the completion Store.Complete calls, for the
// same reason as MigrationFunctions: behind a pooler that cannot keep
// prepared statements a completion is not planned again on every call.
// It also replaces the claim function of MigrationFunctions by one that
// decides the same way but claims an absent key with a plain INSERT … ON
// CONFLICT DO NOTHING before it tries the upsert. Both are named after
// the table (CreateSchema puts the table's name in place of
// dedupe_records throughout the file). The store's claim names the
// completion function too, so apply it before deploying this version:
// without it every claim fails, before any work runs, with an error that
// names the file. It changes no table, writers of earlier versions keep
// working beside it, and it is idempotent; run it from one session at a
// time, as MigrationFunctions.
//
//go:embed migrations/005_complete.sql
var MigrationComplete string

// MigrationRetired is the sixth migration file
// (migrations/006_retired.sql): it creates the partial index of the rows
// Reap retired (inflight false), through which Store.InFlight lists them
// (dedupe stranded). It only creates an index: without it InFlight reads
// those rows with a sequential scan. Rows retired by an earlier version
// are not listed.
//
//go:embed migrations/006_retired.sql
var MigrationRetired string

// DefaultTable is the table name of Migration, used when Options.Table is
// empty.
const DefaultTable = "dedupe_records"

// tableName is what Options.Table may hold: an unquoted identifier, so
// that the statements and the index names derived from it need no
// quoting.
var tableName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,39}$`)

// forTable returns sql with DefaultTable replaced by table.
func forTable(sql, table string) string {
	return strings.ReplaceAll(sql, DefaultTable, table)
}

// schemaLock is the first statement of CreateSchema's transaction: a
// transaction-scoped advisory lock on the table's name, so that
// concurrent calls for one table run one after the other. Without it
// they deadlock (CREATE INDEX IF NOT EXISTS takes a share lock that the
// ALTER TABLE after it must upgrade), and two CREATE OR REPLACE FUNCTION
// of one function fail.
const schemaLock = "SELECT pg_advisory_xact_lock(hashtextextended('pgstore.CreateSchema dedupe_records', 0));\n"

// CreateSchema creates the table (and its indexes) that a Store with
// Options.Table = table uses, unless they exist, and its claim and
// completion functions: it runs Migration, MigrationFirstToken,
// MigrationProvenance, MigrationFunctions, MigrationComplete and
// MigrationRetired with table in place of dedupe_records, so it also brings a table made by an
// earlier version up to date. An empty table means DefaultTable.
// It is one round trip (a multi-statement simple-protocol query, which
// PostgreSQL runs as one transaction), so it also works through
// PgBouncer. Concurrent calls for one table take turns (a
// transaction-scoped advisory lock on its name), so cold starts may each
// call it.
func CreateSchema(ctx context.Context, c Client, table string) error {
	if table == "" {
		table = DefaultTable
	}
	if !tableName.MatchString(table) {
		return fmt.Errorf("%w: table %q is not a lower-case unquoted identifier of at most 40 bytes", ErrInvalidOptions, table)
	}
	if _, err := c.Exec(ctx, forTable(schemaLock+Migration+"\n"+MigrationFirstToken+"\n"+MigrationProvenance+"\n"+MigrationFunctions+"\n"+MigrationComplete+"\n"+MigrationRetired, table)); err != nil {
		return wrap(fmt.Sprintf("pgstore: create schema %s", table), err)
	}
	return nil
}
