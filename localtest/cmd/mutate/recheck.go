package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"go/scanner"
	"go/token"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// mutations are gremlins v0.6.0's token replacements, by mutator
// (internal/engine/mappings.go): a mutant replaces the token at its
// position by the one its mutator maps it to.
var mutations = map[string]map[token.Token]token.Token{
	"ARITHMETIC_BASE": {
		token.ADD: token.SUB, token.MUL: token.QUO, token.QUO: token.MUL,
		token.REM: token.MUL, token.SUB: token.ADD,
	},
	"CONDITIONALS_BOUNDARY": {
		token.GEQ: token.GTR, token.GTR: token.GEQ, token.LEQ: token.LSS, token.LSS: token.LEQ,
	},
	"CONDITIONALS_NEGATION": {
		token.EQL: token.NEQ, token.GEQ: token.LSS, token.GTR: token.LEQ,
		token.LEQ: token.GTR, token.LSS: token.GEQ, token.NEQ: token.EQL,
	},
	"INCREMENT_DECREMENT": {token.DEC: token.INC, token.INC: token.DEC},
	"INVERT_NEGATIVES":    {token.SUB: token.ADD},
	"INVERT_LOGICAL":      {token.LAND: token.LOR, token.LOR: token.LAND},
	"INVERT_LOOPCTRL":     {token.BREAK: token.CONTINUE, token.CONTINUE: token.BREAK},
}

// errMoved is apply's error when the token at a mutant's position is not
// one its mutator changes: the source has changed since the report.
var errMoved = errors.New("no token there that the mutator changes (the source moved since the report)")

// apply returns src, a Go file, with the mutant of mutator typ at line and
// col (1-based, col in bytes, as go/token counts) applied.
func apply(src []byte, line, col int, typ string) ([]byte, error) {
	table, ok := mutations[typ]
	if !ok {
		return nil, fmt.Errorf("mutator %s: not one -recheck applies", typ)
	}
	fset := token.NewFileSet()
	f := fset.AddFile("", fset.Base(), len(src))
	var s scanner.Scanner
	s.Init(f, src, nil, 0)
	for {
		pos, tok, _ := s.Scan()
		if tok == token.EOF {
			return nil, errMoved
		}
		p := f.Position(pos)
		if p.Line < line || p.Line == line && p.Column < col {
			continue
		}
		to, ok := table[tok]
		if p.Line != line || p.Column != col || !ok {
			return nil, errMoved
		}
		off := f.Offset(pos)
		out := make([]byte, 0, len(src)+1)
		out = append(out, src[:off]...)
		out = append(out, to.String()...)
		return append(out, src[off+len(tok.String()):]...), nil
	}
}

// moved is the status -recheck gives a mutant it could not apply.
const moved = "MOVED"

// recheck re-tests, by hand, the mutants of the gremlins report
// o.recheck that neither died nor stayed out of reach of the compiler
// (LIVED and NOT COVERED), of the files o.files names when it is not
// nil: each is applied to a snapshot of the module and PKG's tests run,
// as gremlins does. One that passes stays NOT COVERED when no test
// reaches its position (the unmutated tests' cover profile), else is
// LIVED. The other statuses are kept. It
// writes base.recheck.json (the report with the new statuses) and
// base.recheck.txt, and returns the summary; moved reports how many
// mutants it could not apply.
func recheck(o options, stderr io.Writer) (sum string, nMoved int, _ error) {
	root, rel, err := locate(o.pkg)
	if err != nil {
		return "", 0, err
	}
	ms, err := readReport(o.recheck, rel)
	if err != nil {
		return "", 0, err
	}
	if o.files != nil {
		if _, _, err := excludes(filepath.Join(root, filepath.FromSlash(rel)), o.files); err != nil {
			return "", 0, err
		}
		ms = slices.DeleteFunc(ms, func(m mutant) bool { return !slices.Contains(o.files, path.Base(m.file)) })
	}
	eq, err := readEquivalent(filepath.Join(root, o.equivalent), o.equivalent)
	if err != nil {
		return "", 0, err
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return "", 0, err
	}
	start := time.Now()
	srcs := make([]string, o.workers)
	for i := range srcs {
		dir, err := os.MkdirTemp("", "mutate-recheck-")
		if err != nil {
			return "", 0, err
		}
		defer os.RemoveAll(dir)
		if err := snapshot(root, dir); err != nil {
			return "", 0, fmt.Errorf("snapshot the module: %w", err)
		}
		srcs[i] = dir
	}
	// The unmutated tests first: on a red suite every mutant would count
	// as killed. Their time bounds a mutant's.
	// Their coverage tells a mutant that lives because no test reaches
	// it (NOT COVERED, as gremlins says) from one a test runs (LIVED).
	profile := filepath.Join(srcs[0], "build", "recheck.cover")
	if err := os.MkdirAll(filepath.Dir(profile), 0o755); err != nil {
		return "", 0, err
	}
	t0 := time.Now()
	if out, err := goTest(context.Background(), srcs[0], rel, "-covermode=set", "-coverprofile="+profile); err != nil {
		return "", 0, fmt.Errorf("the unmutated tests of %s fail, so no mutant can be judged: %w\n%s", o.pkg, err, tail(out))
	}
	limit := time.Duration(o.coeff) * time.Since(t0)
	cov, err := readCoverage(profile, root)
	if err != nil {
		return "", 0, err
	}
	fmt.Fprintf(stderr, "mutate: recheck of %s: unmutated tests pass; each mutant's tests time out after %s\n", o.recheck, limit.Round(time.Second))

	var todo []int
	for i, m := range ms {
		if m.Status == "LIVED" || m.Status == "NOT COVERED" {
			todo = append(todo, i)
		}
	}
	jobs := make(chan int)
	var mu sync.Mutex // guards stderr and failed
	var failed error  // the first snapshot that could not be restored
	var wg sync.WaitGroup
	for _, src := range srcs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				status, err := testMutant(src, rel, ms[i], limit)
				if status == "LIVED" && !cov.covers(ms[i]) {
					status = "NOT COVERED"
				}
				mu.Lock()
				if err != nil && failed == nil {
					failed = err
				}
				fmt.Fprintf(stderr, "%11s %s at %s (was %s)\n", status, ms[i].Type, ms[i].Pos, ms[i].Status)
				mu.Unlock()
				ms[i].Status = status
			}
		}()
	}
	for _, i := range todo {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	if failed != nil {
		return "", 0, failed
	}
	if err := stillAnswering(context.Background(), serverWait); err != nil {
		return "", 0, err
	}

	base := filepath.Join(o.out, strings.ReplaceAll(rel, "/", "-")+".recheck")
	if err := writeReport(base+".json", rel, ms); err != nil {
		return "", 0, err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "recheck of %s: its %d LIVED and NOT COVERED mutants tested again by hand\n", o.recheck, len(todo))
	b.WriteString(summarize(o.pkg, ms, eq, time.Since(start)))
	for _, m := range ms {
		if m.Status == moved {
			nMoved++
			fmt.Fprintf(&b, "  MOVED              %s %s: not tested, the source changed there since the report\n", m.Pos, m.Type)
		}
	}
	if err := os.WriteFile(base+".txt", []byte(b.String()), 0o644); err != nil {
		return "", 0, err
	}
	return b.String(), nMoved, nil
}

// testMutant applies m to the snapshot src, runs the tests of the package
// rel within limit, restores the file and returns m's new status: moved
// when m cannot be applied there. The error is a file it could not
// restore, after which no other mutant can be judged in src.
func testMutant(src, rel string, m mutant, limit time.Duration) (string, error) {
	path := filepath.Join(src, filepath.FromSlash(m.file))
	orig, err := os.ReadFile(path)
	if err != nil {
		return moved, nil
	}
	mutated, err := apply(orig, m.line, m.col, m.Type)
	if err != nil {
		return moved, nil
	}
	if err := os.WriteFile(path, mutated, 0o644); err != nil {
		return m.Status, fmt.Errorf("write the mutant of %s: %w", m.Pos, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	out, err := goTest(ctx, src, rel)
	status := "KILLED"
	switch {
	case ctx.Err() != nil:
		status = "TIMED OUT"
	case err == nil:
		status = "LIVED"
	case bytes.Contains(out, []byte("[build failed]")) || bytes.Contains(out, []byte("[setup failed]")):
		status = "NOT VIABLE"
	}
	if err := os.WriteFile(path, orig, 0o644); err != nil {
		return status, fmt.Errorf("restore %s after its mutant %s: %w", m.file, m.Pos, err)
	}
	return status, nil
}

// goTest runs the tests of the package rel of the module at src, uncached,
// with flags, and returns their output.
func goTest(ctx context.Context, src, rel string, flags ...string) ([]byte, error) {
	args := append([]string{"test", "-count=1"}, flags...)
	cmd := exec.CommandContext(ctx, "go", append(args, "./"+rel)...)
	cmd.Dir = src
	cmd.WaitDelay = 5 * time.Second
	return cmd.CombinedOutput()
}

// tail returns the last lines of out, for an error message.
func tail(out []byte) string {
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(lines) > 20 {
		lines = lines[len(lines)-20:]
	}
	return strings.Join(lines, "\n")
}

// writeReport writes ms, the mutants of the package rel, at path in
// gremlins' JSON format (the fields readReport reads, and the counts).
func writeReport(path, rel string, ms []mutant) error {
	var files []reportFile
	count := make(map[string]int)
	for _, m := range ms {
		name := strings.TrimPrefix(m.file, rel+"/")
		if len(files) == 0 || files[len(files)-1].Name != name {
			files = append(files, reportFile{Name: name})
		}
		f := &files[len(files)-1]
		f.Mutations = append(f.Mutations, reportMutation{m.Type, m.Status, m.line, m.col})
		count[m.Status]++
	}
	b, err := json.MarshalIndent(struct {
		report
		Killed     int `json:"mutants_killed"`
		Lived      int `json:"mutants_lived"`
		NotCovered int `json:"mutants_not_covered"`
		TimedOut   int `json:"mutants_timed_out"`
		NotViable  int `json:"mutants_not_viable"`
		Moved      int `json:"mutants_moved"`
	}{report{files}, count["KILLED"], count["LIVED"], count["NOT COVERED"], count["TIMED OUT"], count["NOT VIABLE"], count[moved]}, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// coverage is a cover profile's blocks that ran, by file from the module
// root.
type coverage map[string][]block

// block is a run of source from line and column start to end (exclusive).
type block struct{ sl, sc, el, ec int }

// covers reports whether a block that ran holds m's position.
func (c coverage) covers(m mutant) bool {
	for _, b := range c[m.file] {
		after := m.line > b.sl || m.line == b.sl && m.col >= b.sc
		before := m.line < b.el || m.line == b.el && m.col < b.ec
		if after && before {
			return true
		}
	}
	return false
}

// readCoverage reads the cover profile at path, written by the tests of a
// package of the module at root.
func readCoverage(path, root string) (coverage, error) {
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		return nil, err
	}
	first, _, _ := strings.Cut(string(mod), "\n")
	module, ok := strings.CutPrefix(strings.TrimSpace(first), "module ")
	if !ok {
		return nil, fmt.Errorf("%s/go.mod: no module line first", root)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read the cover profile: %w", err)
	}
	c := make(coverage)
	for n, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if n == 0 {
			continue // mode: set
		}
		// name.go:sl.sc,el.ec statements count
		var name string
		var bl block
		var stmts, count int
		i := strings.LastIndexByte(line, ':')
		if i < 0 {
			return nil, fmt.Errorf("cover profile line %d: %q", n+1, line)
		}
		name = line[:i]
		if _, err := fmt.Sscanf(line[i+1:], "%d.%d,%d.%d %d %d", &bl.sl, &bl.sc, &bl.el, &bl.ec, &stmts, &count); err != nil {
			return nil, fmt.Errorf("cover profile line %d: %q: %w", n+1, line, err)
		}
		if file, ok := strings.CutPrefix(name, module+"/"); ok && count > 0 {
			c[file] = append(c[file], bl)
		}
	}
	return c, nil
}
