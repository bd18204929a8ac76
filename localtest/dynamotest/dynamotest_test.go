package dynamotest_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambda-dedupe/dedupe/localtest/dynamotest"
)

func TestUniqueName(t *testing.T) {
	// DynamoDB table names: 3 to 255 of a-z, A-Z, 0-9, '_', '-', '.'.
	valid := regexp.MustCompile(`^[a-zA-Z0-9_.-]{3,255}$`)
	tests := []struct {
		name, prefix string
		want         *regexp.Regexp
	}{
		{"logical id", "IdempotencyTable", regexp.MustCompile(`^IdempotencyTable-[a-z2-7]{12}$`)},
		{"lower case", "dedupe-test", regexp.MustCompile(`^dedupe-test-[a-z2-7]{12}$`)},
		{"empty", "", regexp.MustCompile(`^-[a-z2-7]{12}$`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := dynamotest.UniqueName(tt.prefix), dynamotest.UniqueName(tt.prefix)
			if !tt.want.MatchString(a) || !valid.MatchString(a) {
				t.Errorf("got %q, want a match for %s", a, tt.want)
			}
			if a == b {
				t.Errorf("got %q twice, want two names", a)
			}
		})
	}
}

// fakeTB records Fatal calls instead of ending the test.
type fakeTB struct {
	testing.TB
	failed string
}

func (f *fakeTB) Helper() {}

func (f *fakeTB) Fatal(args ...any) { f.failed = fmt.Sprint(args...) }

func (f *fakeTB) Fatalf(format string, args ...any) { f.failed = fmt.Sprintf(format, args...) }

func TestCreateTablesFails(t *testing.T) {
	tests := []struct {
		name string
		ids  []string
	}{
		{"no logical id", nil},
		{"not in the template", []string{"IdempotencyTable", "NoSuchTable"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeTB{TB: t}
			// A nil client: CreateTables must fail before it calls the server.
			if got := dynamotest.CreateTables(f, nil, tt.ids...); got != nil || f.failed == "" {
				t.Errorf("got %v and failure %q, want nil and a failure", got, f.failed)
			}
		})
	}
}

// TestCreateTables creates both tables of the template in a subtest, checks
// them, and checks that they are gone (or going) once the subtest is over.
func TestCreateTables(t *testing.T) {
	client := dynamotest.Client(t)
	wantKey := map[string]string{"IdempotencyTable": "ref", "PaymentsTable": "id"}
	var names map[string]string
	t.Run("create", func(t *testing.T) {
		names = dynamotest.CreateTables(t, client, "IdempotencyTable", "PaymentsTable")
		if len(names) != len(wantKey) {
			t.Fatalf("got names %v, want one for each of %v", names, wantKey)
		}
		for id, name := range names {
			if want := regexp.MustCompile(`^` + id + `-[a-z2-7]{12}$`); !want.MatchString(name) {
				t.Errorf("%s: got name %q, want a match for %s", id, name, want)
			}
			out, err := client.DescribeTable(t.Context(), &dynamodb.DescribeTableInput{TableName: aws.String(name)})
			if err != nil {
				t.Fatalf("%s: %v", id, err)
			}
			if got := out.Table.TableStatus; got != types.TableStatusActive {
				t.Errorf("%s: got status %s, want %s", id, got, types.TableStatusActive)
			}
			if got := aws.ToString(out.Table.KeySchema[0].AttributeName); got != wantKey[id] {
				t.Errorf("%s: got key %q, want %q", id, got, wantKey[id])
			}
		}
	})
	for id, name := range names {
		out, err := client.DescribeTable(t.Context(), &dynamodb.DescribeTableInput{TableName: aws.String(name)})
		var nf *types.ResourceNotFoundException
		switch {
		case errors.As(err, &nf):
		case err != nil:
			t.Errorf("%s after the test: %v", id, err)
		case out.Table.TableStatus != types.TableStatusDeleting:
			t.Errorf("%s after the test: got status %s, want it deleted", id, out.Table.TableStatus)
		}
	}
}

// In another module there is no template.yaml: the idempotency table is
// built in.
func TestIdempotencyTableWithoutTemplate(t *testing.T) {
	client := dynamotest.Client(t)
	t.Chdir(t.TempDir())
	name := dynamotest.IdempotencyTable(t, client)
	out, err := client.DescribeTable(t.Context(), &dynamodb.DescribeTableInput{TableName: aws.String(name)})
	if err != nil || len(out.Table.GlobalSecondaryIndexes) != 1 || aws.ToString(out.Table.KeySchema[0].AttributeName) != "ref" {
		t.Fatalf("DescribeTable(%s) = %v; want the table keyed by reference, with its in-flight index", name, err)
	}
	f := &fakeTB{TB: t}
	dynamotest.CreateTables(f, client, "PaymentsTable")
	if f.failed == "" {
		t.Errorf("CreateTables(PaymentsTable) without a template did not fail")
	}
}

// A user's SAM project has a template.yaml of its own, which declares no
// IdempotencyTable (or names it otherwise) and may have parameters
// without defaults: IdempotencyTable reads none of it.
func TestIdempotencyTableInAnotherSAMProject(t *testing.T) {
	client := dynamotest.Client(t)
	templates := map[string]string{
		"a parameter without default": `AWSTemplateFormatVersion: "2010-09-09"
Transform: AWS::Serverless-2016-10-31
Parameters:
  Subnets:
    Type: List<AWS::EC2::Subnet::Id>
Resources:
  Orders:
    Type: AWS::DynamoDB::Table
    Properties:
      BillingMode: PAY_PER_REQUEST
      AttributeDefinitions: [{AttributeName: id, AttributeType: S}]
      KeySchema: [{AttributeName: id, KeyType: HASH}]
`,
		"no IdempotencyTable": `Resources:
  Dedupe:
    Type: AWS::DynamoDB::Table
    Properties:
      BillingMode: PAY_PER_REQUEST
      AttributeDefinitions: [{AttributeName: k, AttributeType: S}]
      KeySchema: [{AttributeName: k, KeyType: HASH}]
`,
		"not a template": "{{ not yaml",
	}
	for name, tpl := range templates {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			for file, body := range map[string]string{"go.mod": "module example.com/orders\n\ngo 1.26\n", "template.yaml": tpl} {
				if err := os.WriteFile(filepath.Join(dir, file), []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			t.Chdir(dir)
			table := dynamotest.IdempotencyTable(t, client)
			out, err := client.DescribeTable(t.Context(), &dynamodb.DescribeTableInput{TableName: aws.String(table)})
			if err != nil {
				t.Fatalf("DescribeTable(%q): %v", table, err)
			}
			if got := aws.ToString(out.Table.KeySchema[0].AttributeName); got != "ref" || len(out.Table.GlobalSecondaryIndexes) != 1 {
				t.Errorf("table %s: key %q and %d indexes; want ref (keyed by reference), with the inflight index", table, got, len(out.Table.GlobalSecondaryIndexes))
			}
		})
	}
}
