package capacity_test

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/lambda-dedupe/dedupe/localtest/capacity"
	"github.com/lambda-dedupe/dedupe/localtest/dynamotest"
)

// TestDocTables holds the README's comparison table and docs/cost.md's
// tables of units and prices per mode and size to what Measure (and so
// `make bench`) computes: each page must hold its table verbatim, and a
// mismatch prints the table the code gives.
func TestDocTables(t *testing.T) {
	client := dynamotest.Client(t)
	table := dynamotest.IdempotencyTable(t, client)
	rows, err := capacity.Measure(t.Context(), client, table, dynamotest.ClassicIdempotencyTable(t, client), true)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ page, table string }{
		{"../../README.md", unitsTable(rows, []string{capacity.ModeLean, capacity.ModeDefault, capacity.ModePowertools}, true)},
		{"../../docs/cost.md", unitsTable(rows, capacity.Modes, false)},
		{"../../docs/cost.md", pricesTable(rows)},
	} {
		page, err := os.ReadFile(tt.page)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(page), tt.table) {
			t.Errorf("%s does not hold the table the code gives:\n%s", tt.page, tt.table)
		}
	}
}

// cell is one row's figure: write units (table and index), then read
// units and calls when asked.
func cell(r capacity.Row, calls bool) string {
	s := fmt.Sprintf("%g", r.WriteTotal())
	if r.Units.Read > 0 {
		s += fmt.Sprintf(" + %g read", r.Units.Read)
	}
	switch {
	case calls && r.Calls == 1:
		s += ", 1 call"
	case calls:
		s += fmt.Sprintf(", %d calls", r.Calls)
	}
	return s
}

// name is how the tables name a mode.
var name = map[string]string{capacity.ModeDefault: "dedupe", capacity.ModeLean: "dedupe `Lean`",
	capacity.ModeClassicDefault: "dedupe, classic schema", capacity.ModeClassicLean: "dedupe `Lean`, classic schema", capacity.ModePowertools: "Powertools"}

// unitsTable is the table of write units (and read units) per scenario,
// mode and size; short leaves out the failure scenario and the calls.
func unitsTable(rows []capacity.Row, modes []string, short bool) string {
	var b strings.Builder
	b.WriteString("| units per request |")
	for _, size := range capacity.Sizes {
		b.WriteString(" " + capacity.SizeName(size) + " |")
	}
	b.WriteString("\n|---|" + strings.Repeat("---|", len(capacity.Sizes)) + "\n")
	for _, sc := range []string{capacity.ScenarioFresh, capacity.ScenarioReplay, capacity.ScenarioFailure, capacity.ScenarioRetry} {
		if short && sc == capacity.ScenarioFailure {
			continue
		}
		for _, mode := range modes {
			fmt.Fprintf(&b, "| %s, %s |", sc, name[mode])
			for _, size := range capacity.Sizes {
				for _, r := range rows {
					if r.Mode == mode && r.Scenario == sc && r.Size == size {
						b.WriteString(" " + cell(r, !short) + " |")
					}
				}
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}

// pricesTable is the on-demand price of a million requests per scenario,
// mode and size.
func pricesTable(rows []capacity.Row) string {
	var b strings.Builder
	b.WriteString("| $ per million |")
	for _, size := range capacity.Sizes {
		b.WriteString(" " + capacity.SizeName(size) + " |")
	}
	b.WriteString("\n|---|" + strings.Repeat("---|", len(capacity.Sizes)) + "\n")
	for _, sc := range []string{capacity.ScenarioFresh, capacity.ScenarioReplay, capacity.ScenarioFailure, capacity.ScenarioRetry} {
		for _, mode := range capacity.Modes {
			fmt.Fprintf(&b, "| %s, %s |", sc, name[mode])
			for _, size := range capacity.Sizes {
				for _, r := range rows {
					if r.Mode == mode && r.Scenario == sc && r.Size == size {
						fmt.Fprintf(&b, " %.3f |", capacity.PerMillion(r.Units))
					}
				}
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}
