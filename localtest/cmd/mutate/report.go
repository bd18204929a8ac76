package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"
)

// mutant is one mutant of gremlins' report.
type mutant struct {
	Pos    string // path from the module root, line and column: pkg/x/f.go:12:5
	Type   string // the mutator, such as CONDITIONALS_NEGATION
	Status string // KILLED, LIVED, NOT COVERED, TIMED OUT, NOT VIABLE
	file   string
	line   int
	col    int
}

// id names m in the equivalent list.
func (m mutant) id() string { return m.Pos + " " + m.Type }

// report is what this command reads of gremlins' JSON report, and
// writes of a recheck's.
type report struct {
	Files []reportFile `json:"files"`
}

// reportFile is one mutated file of a report, named from the package's
// directory.
type reportFile struct {
	Name      string           `json:"file_name"`
	Mutations []reportMutation `json:"mutations"`
}

// reportMutation is one mutant of a reportFile.
type reportMutation struct {
	Type   string `json:"type"`
	Status string `json:"status"`
	Line   int    `json:"line"`
	Column int    `json:"column"`
}

// readReport reads gremlins' JSON report at path; rel is the package's
// directory from the module root, which the report's file names are
// relative to.
func readReport(path, rel string) ([]mutant, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read gremlins' report: %w", err)
	}
	var r report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("read gremlins' report %s: %w", path, err)
	}
	var ms []mutant
	for _, f := range r.Files {
		file := rel + "/" + f.Name
		for _, m := range f.Mutations {
			ms = append(ms, mutant{
				Pos:  fmt.Sprintf("%s:%d:%d", file, m.Line, m.Column),
				Type: m.Type, Status: m.Status,
				file: file, line: m.Line, col: m.Column,
			})
		}
	}
	slices.SortFunc(ms, func(a, b mutant) int {
		return cmp.Or(strings.Compare(a.file, b.file), cmp.Compare(a.line, b.line), cmp.Compare(a.col, b.col), strings.Compare(a.Type, b.Type))
	})
	return ms, nil
}

// entryRE is one entry of the equivalent list.
var entryRE = regexp.MustCompile("^- `([^`]+:[0-9]+:[0-9]+)` ([A-Z_]+): (.+)$")

// readEquivalent reads the equivalent list at path (named name in
// messages): the reason of each entry, by mutant id. A missing file is an
// empty list.
func readEquivalent(path, name string) (map[string]string, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	eq := make(map[string]string)
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if !strings.HasPrefix(line, "- `") {
			continue
		}
		m := entryRE.FindStringSubmatch(line)
		if m == nil {
			return nil, fmt.Errorf("%s:%d: want \"- `path:line:col` MUTATOR: reason\", got %q", name, n, line)
		}
		id := m[1] + " " + m[2]
		if _, dup := eq[id]; dup {
			return nil, fmt.Errorf("%s:%d: %s is listed twice", name, n, id)
		}
		eq[id] = m[3]
	}
	return eq, sc.Err()
}

// summarize returns the summary of pkg's mutants ms: one line of figures,
// then the survivors (with the reason of those listed in eq), the stale
// entries of eq for pkg's files, and the mutants no test covers.
func summarize(pkg string, ms []mutant, eq map[string]string, took time.Duration) string {
	count := make(map[string]int)
	files := make(map[string]bool)
	for _, m := range ms {
		count[m.Status]++
		files[m.file] = true
	}
	killed, lived, uncovered := count["KILLED"], count["LIVED"], count["NOT COVERED"]
	listed := 0
	var b strings.Builder
	for _, m := range ms {
		if m.Status != "LIVED" {
			continue
		}
		if why, ok := eq[m.id()]; ok {
			listed++
			fmt.Fprintf(&b, "  lived, equivalent  %s %s: %s\n", m.Pos, m.Type, why)
		} else {
			fmt.Fprintf(&b, "  LIVED              %s %s\n", m.Pos, m.Type)
		}
	}
	var stale []string
	for id := range eq {
		file, _, _ := strings.Cut(id, ":")
		if !files[file] {
			continue
		}
		status := "no such mutant"
		if i := slices.IndexFunc(ms, func(m mutant) bool { return m.id() == id }); i >= 0 {
			status = ms[i].Status
		}
		if status != "LIVED" {
			stale = append(stale, id+": listed as equivalent, "+status)
		}
	}
	slices.Sort(stale)
	for _, s := range stale {
		// A kill can be spurious (a test that failed for another reason):
		// the entry is checked by hand before it goes.
		fmt.Fprintf(&b, "  stale entry?       %s in this run\n", s)
	}
	for _, m := range ms {
		if m.Status == "NOT COVERED" {
			fmt.Fprintf(&b, "  not covered        %s %s\n", m.Pos, m.Type)
		}
	}
	head := fmt.Sprintf("%s: killed %d, lived %d (%d listed as equivalent), not covered %d, timed out %d, not viable %d; efficacy %s (%s without the listed), mutator coverage %s; %s\n",
		pkg, killed, lived, listed, uncovered, count["TIMED OUT"], count["NOT VIABLE"],
		percent(killed, killed+lived), percent(killed, killed+lived-listed),
		percent(killed+lived, killed+lived+uncovered), took.Round(time.Second))
	return head + b.String()
}

// percent returns n/d as a percentage with one decimal, or "-" when d is 0.
func percent(n, d int) string {
	if d == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(n)/float64(d))
}
