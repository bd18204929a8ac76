package cli_test

import (
	"context"
	"crypto/rand"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/lambda-dedupe/dedupe/cmd/dedupe/internal/cli"
	"github.com/lambda-dedupe/dedupe/localtest/dynalite"
	"github.com/lambda-dedupe/dedupe/localtest/dynamotest"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/dynamostore"
)

// TestKeySchemaFlag: the command calls no DescribeTable (its policy has
// none), so --key-schema names the table's key schema: ref, the default
// (the template's table), or classic (a table created before v0.2.0).
// The wrong one fails loudly and touches nothing; an unknown one is a
// usage error.
func TestKeySchemaFlag(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "x")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "x")
	t.Setenv("AWS_REGION", "us-east-1")
	endpoint := dynalite.Endpoint(t)
	client := dynamotest.Client(t)
	ctx := context.Background()
	classic := dynamotest.UniqueName("cli-classic")
	if _, err := client.CreateTable(ctx, dynamostore.ClassicTableInput(classic)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(classic)})
	})
	if err := dynamodb.NewTableExistsWaiter(client).Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(classic)}, time.Minute); err != nil {
		t.Fatal(err)
	}
	byRef := dynamotest.CreateTables(t, client, dynamotest.IdempotencyTableID)[dynamotest.IdempotencyTableID]
	now := time.Now()
	for _, tt := range []struct {
		name, table string
		right       []string // the flags that name its schema
		wrong       []string
	}{
		{"byref", byRef, nil, []string{"--key-schema", "classic"}},
		{"byref named", byRef, []string{"--key-schema", "ref"}, []string{"--key-schema", "classic"}},
		{"classic", classic, []string{"--key-schema", "classic"}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, err := dynamostore.New(client, dynamostore.Options{Table: tt.table})
			if err != nil {
				t.Fatal(err)
			}
			key := "cli-schema/" + rand.Text()
			if _, err := s.Claim(ctx, dedupe.ClaimRequest{Key: key, Fingerprint: "f", Token: "tok", Now: now, LeaseUntil: now.Add(time.Minute), ExpiresAt: now.Add(time.Hour)}); err != nil {
				t.Fatal(err)
			}
			flags := []string{"--table", tt.table, "--endpoint", endpoint}
			ref := dedupe.KeyRef(key)
			code, out, errOut := run(t, "", append(append([]string{"show", ref}, flags...), tt.right...)...)
			if code != cli.ExitOK || !strings.Contains(out, "IN_PROGRESS") {
				t.Errorf("show with its key schema: exit %d\n%s%s", code, out, errOut)
			}
			code, _, errOut = run(t, "", append(append([]string{"forget", ref, "--token", "nope", "--yes"}, flags...), tt.right...)...)
			if code == cli.ExitOK {
				t.Errorf("forget with the wrong token: exit 0 (%s)", errOut)
			}
			code, out, errOut = run(t, "", append(append([]string{"show", ref}, flags...), tt.wrong...)...)
			if code == cli.ExitOK || strings.Contains(out, "IN_PROGRESS") {
				t.Errorf("show with the wrong key schema: exit %d\n%s%s; want a failure", code, out, errOut)
			}
			if !strings.Contains(errOut, "not keyed as --key-schema") {
				t.Errorf("show with the wrong key schema does not say which flag fixes it:\n%s", errOut)
			}
			if _, err := s.Get(ctx, key, now); err != nil {
				t.Errorf("the record after the wrong key schema: %v", err)
			}
			if code, _, errOut := run(t, "", append([]string{"show", ref, "--key-schema", "hash"}, flags...)...); code != cli.ExitUsage || !strings.Contains(errOut, "--key-schema") {
				t.Errorf("an unknown key schema: exit %d (%s), want %d naming --key-schema", code, errOut, cli.ExitUsage)
			}
		})
	}
}
