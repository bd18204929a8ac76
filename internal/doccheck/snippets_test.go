package doccheck

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"gopkg.in/yaml.v3"

	"github.com/lambda-dedupe/dedupe/infra"
	"github.com/lambda-dedupe/dedupe/internal/goflavour"
	"github.com/lambda-dedupe/dedupe/localtest/dynalite"
	"github.com/lambda-dedupe/dedupe/localtest/dynamotest"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/dynamostore"
)

// tableSnippet is a table definition in the docs, in one of the three
// languages they use.
type tableSnippet struct {
	block
	// create creates it under name on the test endpoint.
	create func(t *testing.T, c *dynamodb.Client, name string)
}

// docTables returns every table definition of the docs: AWS CLI
// create-table lines (sh), CloudFormation tables (yaml) and Terraform
// aws_dynamodb_table resources (hcl).
func docTables(t *testing.T, root string) []tableSnippet {
	t.Helper()
	var out []tableSnippet
	for _, f := range docFiles(t, root) {
		for _, lang := range []string{"sh", "yaml", "hcl"} {
			bs, err := blocks(root, f, lang)
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range bs {
				switch {
				case lang == "sh" && strings.Contains(b.code, "aws dynamodb create-table"):
					out = append(out, tableSnippet{b, createWithCLI(b)})
				case lang == "yaml" && strings.Contains(b.code, "AWS::DynamoDB::Table"):
					out = append(out, tableSnippet{b, createWithCloudFormation(b)})
				case lang == "hcl" && strings.Contains(b.code, `"aws_dynamodb_table"`):
					out = append(out, tableSnippet{b, createWithTerraform(b)})
				}
			}
		}
	}
	return out
}

// TestDocTables creates every table the docs define (AWS CLI,
// CloudFormation, Terraform) on the test's DynamoDB endpoint, checks that
// it is the schema dynamostore.TableInput creates (the template's, held
// there by a test of its own), and runs the runbook's dedupe commands
// (docs/operating.md) and a reap on records a guard wrote into it.
func TestDocTables(t *testing.T) {
	root, err := infra.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	snippets := docTables(t, root)
	langs := map[string]bool{}
	for _, s := range snippets {
		langs[s.lang] = true
	}
	if len(langs) != 3 {
		t.Fatalf("found table definitions in %v, want one in each of sh, yaml and hcl (docs/stores.md)", langs)
	}
	client := dynamotest.Client(t)
	cli := dedupeCommand(t, root)
	runbook := runbookLines(t, root)
	for _, s := range snippets {
		t.Run(fmt.Sprintf("%s:%d", s.file, s.line), func(t *testing.T) {
			name := dynamotest.UniqueName("doc-" + s.lang)
			t.Cleanup(func() {
				client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(name)})
			})
			s.create(t, client, name)
			waitActive(t, client, name)
			got := describeSchema(t, client, name)
			if want := inputSchema(dynamostore.TableInput(name)); got != want {
				t.Errorf("%s:%d creates\n%s\nwant dynamostore.TableInput's\n%s", s.file, s.line, got, want)
			}
			runRunbook(t, cli, runbook, client, name)
		})
	}
}

// createWithCLI runs the block's aws commands, with the table named name,
// against the test endpoint. dynalite has no TTL API: there, the TTL
// command may fail with UnknownOperationException.
func createWithCLI(b block) func(*testing.T, *dynamodb.Client, string) {
	return func(t *testing.T, _ *dynamodb.Client, name string) {
		if _, err := exec.LookPath("aws"); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("the AWS CLI is required in CI to run %s:%d: pip install awscli", b.file, b.line)
			}
			t.Skipf("the AWS CLI is not installed (pip install awscli): %s:%d not run", b.file, b.line)
		}
		endpoint := dynalite.Endpoint(t)
		for _, cmd := range shellCommands(b.code) {
			if !strings.HasPrefix(cmd, "aws dynamodb ") {
				t.Fatalf("%s:%d: %q is not an aws dynamodb command", b.file, b.line, cmd)
			}
			cmd = strings.ReplaceAll(cmd, "--table-name idempotency ", "--table-name "+name+" ")
			c := exec.Command("bash", "-c", cmd)
			c.Env = append(os.Environ(), "AWS_ENDPOINT_URL="+endpoint, "AWS_ACCESS_KEY_ID=x", "AWS_SECRET_ACCESS_KEY=x",
				"AWS_DEFAULT_REGION=us-east-1", "AWS_PAGER=", "AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null")
			out, err := c.CombinedOutput()
			if err != nil && strings.Contains(cmd, "update-time-to-live") && bytes.Contains(out, []byte("UnknownOperationException")) {
				continue // dynalite
			}
			if err != nil {
				t.Fatalf("%s:%d: %s: %v\n%s", b.file, b.line, cmd, err, out)
			}
		}
	}
}

// shellCommands splits a shell block into its commands: lines joined at
// a trailing backslash, comments and blank lines dropped.
func shellCommands(code string) []string {
	var out []string
	var cur strings.Builder
	for _, line := range strings.Split(code, "\n") {
		trimmed := strings.TrimSpace(line)
		if cur.Len() == 0 && (trimmed == "" || strings.HasPrefix(trimmed, "#")) {
			continue
		}
		if c, ok := strings.CutSuffix(trimmed, "\\"); ok {
			cur.WriteString(c)
			cur.WriteByte(' ')
			continue
		}
		cur.WriteString(trimmed)
		out = append(out, strings.Join(strings.Fields(cur.String()), " "))
		cur.Reset()
	}
	return out
}

// createWithCloudFormation loads the block as the resources of a template
// and creates its table as the local stack does (infra.EnsureTables).
func createWithCloudFormation(b block) func(*testing.T, *dynamodb.Client, string) {
	return func(t *testing.T, c *dynamodb.Client, name string) {
		var res map[string]any
		if err := yaml.Unmarshal([]byte(b.code), &res); err != nil {
			t.Fatalf("%s:%d: %v", b.file, b.line, err)
		}
		var id string
		for k := range res {
			id = k
		}
		if len(res) != 1 {
			t.Fatalf("%s:%d: %d resources, want one table", b.file, b.line, len(res))
		}
		indented := "  " + strings.ReplaceAll(strings.TrimRight(b.code, "\n"), "\n", "\n  ")
		path := filepath.Join(t.TempDir(), "template.yaml")
		if err := os.WriteFile(path, []byte("Resources:\n"+indented+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		tpl, err := infra.LoadWithOptions(path, &infra.Options{Names: map[string]string{id: name}})
		if err != nil {
			t.Fatalf("%s:%d: %v", b.file, b.line, err)
		}
		tables, err := infra.Tables(tpl)
		if err != nil {
			t.Fatalf("%s:%d: %v", b.file, b.line, err)
		}
		if len(tables) != 1 || tables[0].TTLAttribute != dynamostore.DefaultAttributes().ExpiresAt {
			t.Fatalf("%s:%d: tables %+v, want one with TTL on expires_at", b.file, b.line, tables)
		}
		if _, err := infra.EnsureTables(t.Context(), c, tables); err != nil {
			t.Fatalf("%s:%d: %v", b.file, b.line, err)
		}
	}
}

// createWithTerraform reads the block's aws_dynamodb_table (the HCL
// subset parseHCL reads; terraform fmt checks the syntax when terraform is
// installed: the provider, which needs the network, is not) and creates
// it with the CreateTable input its arguments map to.
func createWithTerraform(b block) func(*testing.T, *dynamodb.Client, string) {
	return func(t *testing.T, c *dynamodb.Client, name string) {
		if _, err := exec.LookPath("terraform"); err == nil {
			fmtCmd := exec.Command("terraform", "fmt", "-no-color", "-check", "-diff", "-")
			fmtCmd.Stdin = strings.NewReader(b.code)
			fmtCmd.Env = append(os.Environ(), "TF_CLI_CONFIG_FILE=/dev/null")
			if out, err := fmtCmd.CombinedOutput(); err != nil {
				t.Errorf("%s:%d: terraform fmt -check: %v\n%s", b.file, b.line, err, out)
			}
		}
		blocks, err := parseHCL(b.code)
		if err != nil {
			t.Fatalf("%s:%d: %v", b.file, b.line, err)
		}
		if len(blocks) != 1 || blocks[0].Type != "resource" || len(blocks[0].Labels) != 2 || blocks[0].Labels[0] != "aws_dynamodb_table" {
			t.Fatalf("%s:%d: want one resource \"aws_dynamodb_table\", got %+v", b.file, b.line, blocks)
		}
		in, ttl, err := terraformTable(blocks[0])
		if err != nil {
			t.Fatalf("%s:%d: %v", b.file, b.line, err)
		}
		if ttl != dynamostore.DefaultAttributes().ExpiresAt {
			t.Errorf("%s:%d: TTL on %q, want expires_at", b.file, b.line, ttl)
		}
		in.TableName = aws.String(name)
		if _, err := c.CreateTable(t.Context(), in); err != nil {
			t.Fatalf("%s:%d: %v", b.file, b.line, err)
		}
	}
}

// terraformTable maps an aws_dynamodb_table's arguments to a CreateTable
// input, and returns its enabled TTL attribute. An argument or block it
// does not know is an error.
func terraformTable(r hclBlock) (*dynamodb.CreateTableInput, string, error) {
	str := func(m map[string]any, k string) string { s, _ := m[k].(string); return s }
	keys := func(hash, rng string) []types.KeySchemaElement {
		ks := []types.KeySchemaElement{{AttributeName: aws.String(hash), KeyType: types.KeyTypeHash}}
		if rng != "" {
			ks = append(ks, types.KeySchemaElement{AttributeName: aws.String(rng), KeyType: types.KeyTypeRange})
		}
		return ks
	}
	for k := range r.Args {
		if !slices.Contains([]string{"name", "billing_mode", "hash_key", "range_key"}, k) {
			return nil, "", fmt.Errorf("aws_dynamodb_table argument %s is not read by this test", k)
		}
	}
	in := &dynamodb.CreateTableInput{
		BillingMode: types.BillingMode(str(r.Args, "billing_mode")),
		KeySchema:   keys(str(r.Args, "hash_key"), str(r.Args, "range_key")),
	}
	ttl := ""
	for _, b := range r.Blocks {
		switch b.Type {
		case "attribute":
			in.AttributeDefinitions = append(in.AttributeDefinitions, types.AttributeDefinition{
				AttributeName: aws.String(str(b.Args, "name")), AttributeType: types.ScalarAttributeType(str(b.Args, "type"))})
		case "global_secondary_index":
			p := &types.Projection{ProjectionType: types.ProjectionType(str(b.Args, "projection_type"))}
			if nk, ok := b.Args["non_key_attributes"].([]string); ok {
				p.NonKeyAttributes = nk
			}
			in.GlobalSecondaryIndexes = append(in.GlobalSecondaryIndexes, types.GlobalSecondaryIndex{
				IndexName: aws.String(str(b.Args, "name")), KeySchema: keys(str(b.Args, "hash_key"), str(b.Args, "range_key")), Projection: p})
		case "ttl":
			if b.Args["enabled"] == true {
				ttl = str(b.Args, "attribute_name")
			}
		default:
			return nil, "", fmt.Errorf("aws_dynamodb_table block %s is not read by this test", b.Type)
		}
	}
	return in, ttl, nil
}

// waitActive waits until the table and its indexes are ACTIVE.
func waitActive(t *testing.T, c *dynamodb.Client, name string) {
	t.Helper()
	w := dynamodb.NewTableExistsWaiter(c, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay, o.MaxDelay = 10*time.Millisecond, 500*time.Millisecond
	})
	if err := w.Wait(t.Context(), &dynamodb.DescribeTableInput{TableName: aws.String(name)}, time.Minute); err != nil {
		t.Fatalf("wait for %s: %v", name, err)
	}
}

// describeSchema renders what DynamoDB says of the table's schema.
func describeSchema(t *testing.T, c *dynamodb.Client, name string) string {
	t.Helper()
	out, err := c.DescribeTable(t.Context(), &dynamodb.DescribeTableInput{TableName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	td := out.Table
	billing := types.BillingModeProvisioned
	if td.BillingModeSummary != nil {
		billing = td.BillingModeSummary.BillingMode
	}
	in := &dynamodb.CreateTableInput{AttributeDefinitions: td.AttributeDefinitions, KeySchema: td.KeySchema, BillingMode: billing}
	for _, g := range td.GlobalSecondaryIndexes {
		in.GlobalSecondaryIndexes = append(in.GlobalSecondaryIndexes, types.GlobalSecondaryIndex{IndexName: g.IndexName, KeySchema: g.KeySchema, Projection: g.Projection})
	}
	return inputSchema(in)
}

// inputSchema renders a table's schema, in a canonical order, without
// its name.
func inputSchema(in *dynamodb.CreateTableInput) string {
	var lines []string
	for _, a := range in.AttributeDefinitions {
		lines = append(lines, "attribute "+aws.ToString(a.AttributeName)+" "+string(a.AttributeType))
	}
	ks := func(k []types.KeySchemaElement) string {
		var s []string
		for _, e := range k {
			s = append(s, aws.ToString(e.AttributeName)+" "+string(e.KeyType))
		}
		return strings.Join(s, ", ")
	}
	lines = append(lines, "key "+ks(in.KeySchema), "billing "+string(in.BillingMode))
	for _, g := range in.GlobalSecondaryIndexes {
		nk := slices.Clone(g.Projection.NonKeyAttributes)
		slices.Sort(nk)
		lines = append(lines, fmt.Sprintf("index %s: %s; %s %v", aws.ToString(g.IndexName), ks(g.KeySchema), g.Projection.ProjectionType, nk))
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// runbookLine is one dedupe command of the runbook, with the block it is
// in: the runbook's placeholders name the record the block is about.
type runbookLine struct {
	block block
	args  []string
}

// runbookLines returns the dedupe commands of docs/operating.md's sh
// blocks, split into arguments as the shell would (double quotes only).
func runbookLines(t *testing.T, root string) []runbookLine {
	t.Helper()
	bs, err := blocks(root, "docs/operating.md", "sh")
	if err != nil {
		t.Fatal(err)
	}
	var out []runbookLine
	for _, b := range bs {
		for _, cmd := range shellCommands(b.code) {
			if !strings.HasPrefix(cmd, "dedupe ") {
				continue
			}
			if i := strings.Index(cmd, " #"); i >= 0 {
				cmd = cmd[:i]
			}
			out = append(out, runbookLine{block: b, args: shellWords(strings.TrimPrefix(cmd, "dedupe "))})
		}
	}
	if len(out) < 4 {
		t.Fatalf("found %d dedupe commands in docs/operating.md, want the runbook's", len(out))
	}
	return out
}

// shellWords splits s at spaces outside double quotes (dropped) and
// outside a <placeholder> (kept whole).
func shellWords(s string) []string {
	var out []string
	var cur strings.Builder
	quoted, any, angle := false, false, false
	for _, r := range s {
		switch {
		case r == '"':
			quoted, any = !quoted, true
		case r == '<' && !quoted:
			angle = true
			cur.WriteRune(r)
		case r == '>' && angle:
			angle = false
			cur.WriteRune(r)
		case r == ' ' && !quoted && !angle:
			if any || cur.Len() > 0 {
				out = append(out, cur.String())
			}
			cur.Reset()
			any = false
		default:
			cur.WriteRune(r)
		}
	}
	if any || cur.Len() > 0 {
		out = append(out, cur.String())
	}
	return out
}

// runRunbook runs each runbook command on table, block by block: for
// each block a guard writes a completed record and a stranded one, and the
// block's commands run on the one it is about (a block that releases: the
// stranded record; else the completed one). Then it reaps the table. A
// saved event a command reads (dedupe key --event) is the command's test
// event, cmd/dedupe/internal/cli/testdata.
func runRunbook(t *testing.T, cli string, lines []runbookLine, client *dynamodb.Client, table string) {
	t.Helper()
	ctx := t.Context()
	store, err := dynamostore.New(client, dynamostore.Options{Table: table})
	if err != nil {
		t.Fatal(err)
	}
	root, err := infra.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	records := func() (done, stuck dedupe.Record) {
		g := dedupe.New(store, &dedupe.Config{Prefix: "doc-" + rand.Text()[:8]})
		if _, err := g.Do(ctx, dedupe.Call{Key: "done", Fingerprint: "fp"}, func(context.Context) (dedupe.Result, error) { return dedupe.Result{StatusCode: 400}, nil }); err != nil {
			t.Fatal(err)
		}
		if done, err = store.Get(ctx, g.Key("done"), time.Now()); err != nil {
			t.Fatal(err)
		}
		at := time.Now().Add(-time.Hour)
		if res, err := store.Claim(ctx, dedupe.ClaimRequest{Key: g.Key("stuck"), Fingerprint: "fp", Token: "dead-" + rand.Text(),
			Now: at, LeaseUntil: at.Add(time.Minute), ExpiresAt: at.Add(24 * time.Hour)}); err != nil || !res.Acquired {
			t.Fatalf("strand: %+v, %v", res, err)
		}
		if stuck, err = store.Get(ctx, g.Key("stuck"), time.Now()); err != nil {
			t.Fatal(err)
		}
		return done, stuck
	}
	placeholder := regexp.MustCompile(`^key:[0-9a-f]{12}$`)
	var done, stuck dedupe.Record
	lastBlock := -1
	for _, l := range lines {
		if l.block.line != lastBlock {
			done, stuck = records()
			lastBlock = l.block.line
		}
		rec := done
		if strings.Contains(l.block.code, "dedupe release") {
			rec = stuck
		}
		args := slices.Clone(l.args)
		for i, a := range args {
			switch {
			case placeholder.MatchString(a):
				args[i] = dedupe.KeyRef(rec.Key)
			case strings.HasPrefix(a, "<owner token"):
				args[i] = rec.Token
			case strings.HasPrefix(a, "<"):
				t.Fatalf("%s:%d: dedupe %s: placeholder %s this test cannot fill", l.block.file, l.block.line, strings.Join(l.args, " "), a)
			}
		}
		if args[0] == "forget" && !slices.Contains(args, "--yes") {
			args = append(args, "--yes") // the runbook types yes at the prompt
		}
		if args[0] != "key" {
			args = append(args, "--table", table, "--endpoint", dynalite.Endpoint(t))
		}
		cmd := exec.Command(cli, args...)
		cmd.Dir = filepath.Join(root, "cmd", "dedupe", "internal", "cli", "testdata")
		cmd.Env = []string{"AWS_ACCESS_KEY_ID=x", "AWS_SECRET_ACCESS_KEY=x", "AWS_REGION=us-east-1", "USER=doccheck", "HOME=" + t.TempDir()}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%s:%d: dedupe %s: %v\n%s", l.block.file, l.block.line, strings.Join(l.args, " "), err, out)
		}
	}
	if _, err := store.Reap(ctx, dynamostore.ReapOptions{}); err != nil {
		t.Errorf("reap: %v", err)
	}
}

var (
	cliOnce sync.Once
	cliPath string
	cliErr  error
)

// dedupeCommand builds the dedupe command once, in this test's flavour.
func dedupeCommand(t *testing.T, root string) string {
	t.Helper()
	cliOnce.Do(func() {
		dir, err := os.MkdirTemp("", "doccheck-")
		if err != nil {
			cliErr = err
			return
		}
		cliPath = filepath.Join(dir, "dedupe")
		own := goflavour.Own()
		cmd := exec.Command("go", append(append([]string{"build"}, own.Args()...), "-o", cliPath, "./cmd/dedupe")...)
		cmd.Dir, cmd.Env = root, append(os.Environ(), own.Env()...)
		if out, err := cmd.CombinedOutput(); err != nil {
			cliErr = fmt.Errorf("go build ./cmd/dedupe: %v\n%s", err, out)
		}
	})
	if cliErr != nil {
		t.Fatal(cliErr)
	}
	return cliPath
}

// TestDocPolicies checks the policies the docs' templates show (YAML
// blocks whose functions set IDEMPOTENCY_TABLE) as infra's tests check the
// shipped ones: each function's statements allow exactly what its roles
// need (the permissions table).
func TestDocPolicies(t *testing.T) {
	root, err := infra.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := infra.Permissions()
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, f := range docFiles(t, root) {
		bs, err := blocks(root, f, "yaml")
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range bs {
			if !strings.Contains(b.code, "IDEMPOTENCY_TABLE") {
				continue
			}
			path := filepath.Join(t.TempDir(), "template.yaml")
			if err := os.WriteFile(path, []byte(b.code), 0o644); err != nil {
				t.Fatal(err)
			}
			tpl, err := infra.Load(path)
			if err != nil {
				t.Errorf("%s:%d: %v", b.file, b.line, err)
				continue
			}
			fns, err := infra.Functions(tpl)
			if err != nil {
				t.Errorf("%s:%d: %v", b.file, b.line, err)
				continue
			}
			for _, fn := range fns {
				roles := infra.FunctionRoles(fn)
				if roles == nil {
					continue
				}
				checked++
				table, bucket := tpl.DedupeARNs(fn)
				got, err := tbl.CheckPolicy(fn.Statements, table, bucket, roles...)
				if err != nil {
					t.Fatal(err)
				}
				if len(got.Missing) > 0 || len(got.Extra) > 0 {
					t.Errorf("%s:%d: %s (%v) lacks %v, allows beyond what dedupe calls %q (docs/deploying.md, what each role needs)",
						b.file, b.line, fn.LogicalID, roles, got.Missing, got.Extra)
				}
			}
		}
	}
	if checked == 0 {
		t.Error("no guarded function in the docs' YAML: docs/deploying.md's own-stack example at least")
	}
}

// TestDocYAML: every YAML block of the docs parses.
func TestDocYAML(t *testing.T) {
	root, err := infra.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range docFiles(t, root) {
		bs, err := blocks(root, f, "yaml")
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range bs {
			var v any
			if err := yaml.Unmarshal([]byte(b.code), &v); err != nil {
				t.Errorf("%s:%d: %v", b.file, b.line, err)
			}
		}
	}
}

// TestDocCommandLines: in the docs' shell blocks, every make command names
// targets of the Makefile, and every go command's ./package exists.
func TestDocCommandLines(t *testing.T) {
	root, err := infra.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	targets := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^([A-Za-z][A-Za-z0-9_-]*):`).FindAllStringSubmatch(string(mk), -1) {
		targets[m[1]] = true
	}
	lines := 0
	for _, f := range docFiles(t, root) {
		bs, err := blocks(root, f, "sh")
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range bs {
			for _, cmd := range shellCommands(b.code) {
				if i := strings.Index(cmd, " #"); i >= 0 {
					cmd = cmd[:i]
				}
				words := strings.Fields(cmd)
				switch words[0] {
				case "make":
					lines++
					for _, w := range words[1:] {
						if !strings.Contains(w, "=") && !strings.HasPrefix(w, "-") && !strings.HasPrefix(w, "'") && !targets[w] {
							t.Errorf("%s:%d: %s: the Makefile has no target %q", b.file, b.line, cmd, w)
						}
					}
				case "go":
					lines++
					for _, w := range words[1:] {
						pkg, _, _ := strings.Cut(strings.TrimSuffix(w, "/..."), "@")
						pkg = strings.TrimPrefix(pkg, "github.com/lambda-dedupe/dedupe/")
						if !strings.HasPrefix(w, "./") && !strings.HasPrefix(w, "github.com/lambda-dedupe/dedupe/") {
							continue
						}
						if _, err := os.Stat(filepath.Join(root, pkg)); errors.Is(err, os.ErrNotExist) {
							t.Errorf("%s:%d: %s: no package %s", b.file, b.line, cmd, w)
						}
					}
				}
			}
		}
	}
	if lines == 0 {
		t.Error("no make or go command in the docs' shell blocks")
	}
}
