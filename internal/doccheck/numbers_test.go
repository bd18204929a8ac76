package doccheck

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lambda-dedupe/dedupe/infra"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/dynamostore"
	"github.com/lambda-dedupe/dedupe/pkg/redisstore"
)

// docNumber is a number the docs state, the code's value it must be, and
// where the docs state it: each pattern's one group is the number as
// written ("5 min", "4 KiB", "2,048"). Every match in any page must be the
// code's value, and the canonical page must state it.
type docNumber struct {
	name      string
	value     any // time.Duration or int
	canonical string
	patterns  []string
}

// docNumbers are the defaults and limits a user relies on. Numbers the
// tests of their own packages hold are elsewhere: Wait's read budget
// (pkg/dedupe), write units (localtest/capacity), tok_slow (functions/api).
var docNumbers = []docNumber{
	{"Config.Retention's default", dedupe.DefaultRetention, "options.md", []string{
		"Zero means `DefaultRetention` \\(([^)]+)\\)", "`Retention` \\(([0-9]+ ?h) by default\\)", "for `Retention`\\s+\\(([0-9]+ ?h)\\)"}},
	{"Config.DefaultLease's default", dedupe.DefaultLease, "options.md", []string{
		"`DefaultLease` \\| [^|]*Zero means ([0-9]+ \\w+)\\.", "the lease is `DefaultLease`, ([0-9]+\\s+\\w+)", "capped; ([0-9]+ \\w+) when the\\s+context has no deadline"}},
	{"Config.MaxLease's default", dedupe.DefaultMaxLease, "options.md", []string{
		"`MaxLease` \\| [^|]*Zero means ([0-9]+ \\w+)\\.", "capped at `MaxLease` \\(([0-9]+ \\w+)\\)"}},
	{"Config.LeaseMargin's default", dedupe.DefaultLeaseMargin, "options.md", []string{
		"`LeaseMargin` \\| [^|]*Zero means ([0-9]+ \\w+)\\.", "`LeaseMargin`\\s+\\(([0-9]+ \\w+)\\)"}},
	{"MinRetention", dedupe.MinRetention, "options.md", []string{
		"`MinRetention` is ([0-9]+ \\w+)", "`MinRetention` \\(([0-9]+ \\w+)\\)"}},
	{"HTTPConfig.MaxBodyBytes's default", dedupe.DefaultMaxBodyBytes, "options.md", []string{
		"`MaxBodyBytes` \\| [^|]*Zero means ([0-9]+ MiB)", "`MaxBodyBytes` \\(([0-9]+ MiB)\\)"}},
	{"dynamostore's compression threshold", dynamostore.DefaultCompressAbove, "stores.md", []string{
		"`Options.CompressAbove` \\(([0-9]+ KiB)\\)", "[Bb]odies above ([0-9]+ KiB)", "gzip above ([0-9]+ KiB)", "gzip-compressed above ([0-9]+ KiB)"}},
	{"dynamostore's item margin", 400<<10 - dynamostore.DefaultMaxItemBytes, "stores.md", []string{
		"400 KB less ([0-9]+ KiB)", "400 KB item, minus a ([0-9]+ KiB) margin"}},
	{"the longest key", dedupe.MaxStoreKeyBytes, "stores.md", []string{
		"1 to ([0-9,]+) bytes", "DynamoDB's ([0-9,]+)-byte key limit"}},
	{"dynamostore's in-flight shards", dynamostore.DefaultShards, "stores.md", []string{
		"`fnv32a\\(key\\) mod ([0-9]+)`", "1 `Query` per shard \\(([0-9]+)\\)"}},
	{"redisstore's and pgstore's result limit", redisstore.DefaultMaxResultBytes, "stores.md", []string{
		"`Options.MaxResultBytes`,? \\(?([0-9]+ KiB)", "`Options.MaxResultBytes`, default ([0-9]+ KiB)"}},
	{"redisstore's TTL margin", redisstore.DefaultTTLMargin, "stores.md", []string{
		"`Options.TTLMargin`, ([0-9]+ \\w+)\\)"}},
}

// parseDocNumber reads a number as the docs write it: a duration ("5
// min", "2 s", "24 h", "1 minute") or a size or count ("4 KiB", "1 MiB",
// "2,048", "8").
func parseDocNumber(s string) (any, error) {
	s = strings.Join(strings.Fields(s), " ")
	num, unit, _ := strings.Cut(strings.ReplaceAll(s, ",", ""), " ")
	if unit == "" { // "24h"
		i := strings.IndexFunc(num, func(r rune) bool { return r < '0' || r > '9' })
		if i > 0 {
			num, unit = num[:i], num[i:]
		}
	}
	n, err := strconv.Atoi(num)
	if err != nil {
		return nil, fmt.Errorf("%q: %w", s, err)
	}
	switch unit {
	case "":
		return n, nil
	case "KiB":
		return n << 10, nil
	case "MiB":
		return n << 20, nil
	case "ms":
		return time.Duration(n) * time.Millisecond, nil
	case "s", "second", "seconds":
		return time.Duration(n) * time.Second, nil
	case "min", "minute", "minutes":
		return time.Duration(n) * time.Minute, nil
	case "h", "hour", "hours":
		return time.Duration(n) * time.Hour, nil
	}
	return nil, fmt.Errorf("%q: unknown unit %q", s, unit)
}

// TestDocNumbers holds every statement of the numbers in docNumbers, in
// README.md and docs/*.md, to the code's value, and requires the
// canonical page to state each.
func TestDocNumbers(t *testing.T) {
	root, err := infra.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	pages := map[string]string{}
	for _, f := range docFiles(t, root) {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		pages[f] = string(b)
	}
	for _, n := range docNumbers {
		t.Run(n.name, func(t *testing.T) {
			stated := false
			for _, p := range n.patterns {
				re := regexp.MustCompile(p)
				for f, text := range pages {
					for _, m := range re.FindAllStringSubmatch(text, -1) {
						got, err := parseDocNumber(m[1])
						if err != nil {
							t.Errorf("%s: %q: %v", f, m[0], err)
							continue
						}
						if got != n.value {
							t.Errorf("%s says %q: the code's %s is %v", f, m[0], n.name, n.value)
						}
						if filepath.Base(f) == n.canonical {
							stated = true
						}
					}
				}
			}
			if !stated {
				t.Errorf("docs/%s does not state %s (%v) in any of the forms %q", n.canonical, n.name, n.value, n.patterns)
			}
		})
	}
}

func TestParseDocNumber(t *testing.T) {
	for in, want := range map[string]any{"5 min": 5 * time.Minute, "2 s": 2 * time.Second, "24 h": 24 * time.Hour, "24h": 24 * time.Hour,
		"1 minute": time.Minute, "4 KiB": 4096, "1 MiB": 1 << 20, "2,048": 2048, "8": 8, "5\n  minutes": 5 * time.Minute} {
		if got, err := parseDocNumber(in); err != nil || got != want {
			t.Errorf("parseDocNumber(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
}
