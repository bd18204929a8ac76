package main

import (
	"bytes"
	"context"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lambda-dedupe/dedupe/internal/maketest"
	"github.com/lambda-dedupe/dedupe/localtest/dynalite"
)

// TestMain makes this test binary a racer when run as one, as the command
// makes itself.
func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(child(context.Background(), os.Args[1:], os.Stdin, os.Stdout))
	}
	os.Exit(m.Run())
}

// TestRace races duplicates as processes on the test's DynamoDB endpoint:
// the guard's count is exactly one in every round, and the naive check
// did the work at least once (how often depends on the scheduler).
func TestRace(t *testing.T) {
	endpoint := dynalite.Endpoint(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	rounds, err := run(t.Context(), &out, self, endpoint, []int{2, 10}, 100*time.Millisecond)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	t.Log("\n" + out.String())
	for _, r := range rounds {
		if r.Guard != 1 {
			t.Errorf("%d duplicates: the guard let %d do the work, want exactly 1", r.N, r.Guard)
		}
		if r.Naive < 1 || r.Naive > r.N {
			t.Errorf("%d duplicates: the naive check did the work %d times, want 1 to %d", r.N, r.Naive, r.N)
		}
	}
}

// TestRaceInGettingStarted: docs/getting-started.md shows the command's
// output for its default sizes, as printRounds writes it, with the
// guard's count at one.
func TestRaceInGettingStarted(t *testing.T) {
	page, err := os.ReadFile("../../docs/getting-started.md")
	if err != nil {
		t.Fatal(err)
	}
	var header bytes.Buffer
	printRounds(&header, nil)
	i := strings.Index(string(page), strings.TrimSpace(header.String()))
	if i < 0 {
		t.Fatalf("docs/getting-started.md does not show make race's table (%q)", strings.TrimSpace(header.String()))
	}
	row := regexp.MustCompile(`^(\d+) +(\d+) executed +(\d+) executed$`)
	var sizes []string
	for _, line := range strings.Split(string(page[i:]), "\n")[1:] {
		m := row.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil {
			break
		}
		sizes = append(sizes, m[1])
		if m[3] != "1" {
			t.Errorf("the doc shows the guard executing %s times for %s duplicates", m[3], m[1])
		}
		if n, _ := strconv.Atoi(m[2]); n < 1 {
			t.Errorf("the doc shows the naive check executing %s times", m[2])
		}
	}
	if strings.Join(sizes, ",") != "2,10,50" {
		t.Errorf("the doc shows rounds %v, want make race's 2, 10 and 50", sizes)
	}
}

// TestMakeRaceRunsThisCommand: `make race` runs this command.
func TestMakeRaceRunsThisCommand(t *testing.T) {
	out := maketest.DryRun(t, "race")
	if !strings.Contains(out, "go run ./examples/race") {
		t.Errorf("make -n race does not run ./examples/race:\n%s", out)
	}
}
